"""The words of ``lab up``: ``--link NAME=RATE/RTT`` and ``--speed NAME=FACTOR``."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_HOSTS = 32
_RATE_UNITS = {"kbit": 1e-3, "k": 1e-3, "mbit": 1.0, "m": 1.0, "gbit": 1e3, "g": 1e3}
_TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
_NUMBER = r"(\d+(?:\.\d+)?)"


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class LinkSpec:
    """One host's link: rate in Mbit/s (None: the veth's own speed), RTT in ms."""

    rate_mbit: float | None = None
    rtt_ms: float = 0.0


def host_names(count: int) -> list[str]:
    if not 1 <= count <= MAX_HOSTS:
        raise SpecError(f"--hosts must be 1..{MAX_HOSTS}, not {count}")
    return [f"h{i}" for i in range(1, count + 1)]


def _quantity(text: str, units: dict[str, float], what: str) -> float:
    match = re.fullmatch(_NUMBER + r"\s*([a-z]*)", text.strip().lower())
    if match is None or match.group(2) not in units:
        raise SpecError(f"{what} {text!r}: a number and one of {', '.join(units)}")
    return float(match.group(1)) * units[match.group(2)]


def _split(item: str, option: str, names: list[str]) -> tuple[list[str], str]:
    name, sep, value = item.partition("=")
    if not sep:
        raise SpecError(f"{option} {item!r}: expected NAME=VALUE")
    if name == "all":
        return names, value
    if name not in names:
        raise SpecError(f"{option} {item!r}: no host {name!r} (hosts are {', '.join(names)})")
    return [name], value


def parse_links(items: list[str], names: list[str]) -> dict[str, LinkSpec]:
    """``NAME=RATE/RTT`` (``100mbit/3ms``, ``1gbit/500us``, ``100mbit``, ``/2ms``);
    NAME ``all`` means every host."""
    links: dict[str, LinkSpec] = {}
    for item in items:
        targets, value = _split(item, "--link", names)
        rate_text, _, rtt_text = value.partition("/")
        rate = _quantity(rate_text, _RATE_UNITS, "rate") if rate_text.strip() else None
        rtt = _quantity(rtt_text, _TIME_UNITS, "RTT") if rtt_text.strip() else 0.0
        if rate is not None and rate <= 0:
            raise SpecError(f"--link {item!r}: the rate must be above 0")
        if rtt > 10_000:
            raise SpecError(f"--link {item!r}: an RTT above 10 s is not a LAN")
        for name in targets:
            links[name] = LinkSpec(rate, rtt)
    return links


def parse_speeds(items: list[str], names: list[str]) -> dict[str, float]:
    """``NAME=FACTOR``: that host's device is FACTOR times slower (``--host-slowdown``)."""
    speeds: dict[str, float] = {}
    for item in items:
        targets, value = _split(item, "--speed", names)
        try:
            factor = float(value)
        except ValueError:
            raise SpecError(f"--speed {item!r}: FACTOR must be a number") from None
        if not factor >= 1.0:
            raise SpecError(f"--speed {item!r}: FACTOR is a slowdown, at least 1")
        for name in targets:
            speeds[name] = factor
    return speeds
