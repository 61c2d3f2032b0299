"""Build a recorded lab: what ``lab up`` does, callable from a benchmark or a test.

``build_lab`` makes the hosts, shapes them, starts the agents and returns the
record (``state.py``) once every agent has linked every other; ``running_lab``
also removes it all afterwards. Everything is recorded before it exists, so
``remove`` (or ``gleam-peer lab down``) can clean up after any failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager

from gleam.peer.lab.agents import start_agents, wait_linked
from gleam.peer.lab.netns import NetLab
from gleam.peer.lab.spec import LinkSpec
from gleam.peer.lab.state import HostRecord, LabRecord, lab_root, record_error, remove

PORT = 7411
READY_TIMEOUT = 60.0
# The smallest htb bucket that passes a 64 KiB GSO frame whole: a bigger one
# lets a train's start through at line rate, which no real link does.
BURST = "64k"


def _hosts(lab: NetLab, record: LabRecord, names: list[str], links: Mapping[str, LinkSpec],
           speeds: Mapping[str, float]) -> None:
    for name in names:
        spec = links.get(name, LinkSpec())
        host = lab.add_host(name, delay_s=spec.rtt_ms / 1000,
                            stats=lab_root() / record.tag / f"delay-{name}.json")
        if spec.rate_mbit is not None:
            lab.shape(host, spec.rate_mbit, burst=BURST)
        else:
            lab.delay(host)
        record.hosts.append(HostRecord(
            name, host.netns, host.address, rate_mbit=spec.rate_mbit,
            rtt_ms=spec.rtt_ms or None, speed=speeds.get(name, 1.0)))
        record.save()


def build_lab(names: list[str], links: Mapping[str, LinkSpec], speeds: Mapping[str, float],
              *, agents: bool = True, probe_interval: float = 30.0,
              clients: Collection[str] = ()) -> LabRecord:
    """Build the lab; on any failure remove what was made and raise.

    The agents of ``clients`` serve nothing (``--backend none``)."""
    tag = secrets.token_hex(3)
    directory = lab_root() / tag
    try:
        directory.mkdir(parents=True, mode=0o700)
    except OSError as exc:
        raise record_error(exc, f"cannot create the lab's directory {directory}") from exc
    record = LabRecord(tag=tag, directory=str(directory))
    try:
        record.save()  # before anything exists: `lab down` can always find the lab
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # nothing else exists yet
        raise
    # The builder itself first: a `lab down` from another shell while this is
    # still building stops it before it removes what it made.
    record.journal("process", os.getpid())
    try:
        lab = NetLab(journal=record.journal, tag=tag)
        record.switch = lab.switch
        if any(spec.rtt_ms > 0 for spec in links.values()):
            record.delay = "netem" if lab.use_netem else "delay line"
        _hosts(lab, record, names, links, speeds)
        if agents:
            start_agents(lab, record, PORT, probe_interval, clients)
            wait_linked(record, READY_TIMEOUT)
        record.complete = True
        record.save()
    except BaseException:
        remove(record)
        raise
    return record


@contextmanager
def running_lab(names: list[str], links: Mapping[str, LinkSpec],
                speeds: Mapping[str, float] | None = None, *, agents: bool = True,
                probe_interval: float = 30.0, clients: Collection[str] = ()
                ) -> Iterator[LabRecord]:
    """``build_lab`` for the length of a ``with`` block."""
    record = build_lab(names, links, speeds or {}, agents=agents,
                       probe_interval=probe_interval, clients=clients)
    try:
        yield record
    finally:
        remove(record)
