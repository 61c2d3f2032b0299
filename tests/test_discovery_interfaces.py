"""Interface selection rules, over made-up adapter lists (no network is touched)."""

from __future__ import annotations

import ifaddr
import pytest

from gleam.discovery.interfaces import (
    InterfaceError,
    SelectedInterface,
    advertised_addresses,
    select_interfaces,
    zeroconf_interfaces,
)


def adapter(name: str, index: int, *addresses: str, nice_name: str | None = None) -> ifaddr.Adapter:
    ips = []
    for text in addresses:
        if ":" in text:
            scope = index if text.startswith("fe80") else 0
            ips.append(ifaddr.IP((text, 0, scope), 64, name))
        else:
            ips.append(ifaddr.IP(text, 24, name))
    return ifaddr.Adapter(name, nice_name or name, ips, index)


LO = adapter("lo", 1, "127.0.0.1", "::1")
ETH = adapter("eth0", 2, "192.168.1.20", "fe80::1")
WLAN = adapter("wlan0", 3, "10.0.0.7")
CONTAINERY = [
    adapter("docker0", 10, "172.17.0.1"),
    adapter("veth3a9f", 11, "fe80::aa"),
    adapter("br-5e1c2d", 12, "172.18.0.1"),
    adapter("virbr0", 13, "192.168.122.1"),
    adapter("tailscale0", 14, "100.64.0.3"),
    adapter("utun4", 15, "fd7a::3"),
]


def names(selection: list[SelectedInterface]) -> list[str]:
    return [iface.name for iface in selection]


def test_default_takes_lan_interfaces_and_skips_container_and_vpn_ones() -> None:
    selection = select_interfaces((), [LO, ETH, WLAN, *CONTAINERY])
    assert names(selection) == ["eth0", "wlan0"]
    assert selection[0].ipv4 == ("192.168.1.20",)
    assert selection[0].ipv6 == ("fe80::1",)


@pytest.mark.parametrize("skipped", CONTAINERY, ids=lambda a: a.name)
def test_each_skipped_family_is_skipped(skipped: ifaddr.Adapter) -> None:
    assert names(select_interfaces((), [ETH, skipped])) == ["eth0"]


def test_interfaces_without_address_are_not_used() -> None:
    down = adapter("eth1", 5)
    assert names(select_interfaces((), [ETH, down])) == ["eth0"]


def test_loopback_is_the_fallback_when_nothing_else_is_up() -> None:
    selection = select_interfaces((), [LO, *CONTAINERY])
    assert names(selection) == ["lo"]
    # python-zeroconf cannot multicast over ::1, so loopback is IPv4 only.
    assert selection[0].loopback and selection[0].ipv6 == ()


def test_nothing_usable_gives_an_empty_selection() -> None:
    assert select_interfaces((), CONTAINERY) == []


def test_explicit_names_override_the_default() -> None:
    assert names(select_interfaces(["lo"], [LO, ETH, WLAN])) == ["lo"]
    assert names(select_interfaces(["docker0", "wlan0"], [LO, ETH, WLAN, *CONTAINERY])) == [
        "wlan0",
        "docker0",
    ]


def test_explicit_address_selects_only_that_address() -> None:
    eth = adapter("eth0", 2, "192.168.1.20", "192.168.1.21", "fe80::1")
    selection = select_interfaces(["192.168.1.21"], [LO, eth])
    assert selection == [SelectedInterface("eth0", 2, ("192.168.1.21",), (), False)]
    selection = select_interfaces(["fe80::1%2"], [LO, eth])
    assert selection == [SelectedInterface("eth0", 2, (), ("fe80::1",), False)]


def test_name_and_address_of_one_interface_give_the_whole_interface() -> None:
    selection = select_interfaces(["192.168.1.20", "eth0"], [ETH])
    assert selection == [SelectedInterface("eth0", 2, ("192.168.1.20",), ("fe80::1",), False)]


def test_windows_nice_name_is_accepted() -> None:
    guid = adapter("{846EE342-7039-11DE}", 7, "192.168.5.5", nice_name="Ethernet")
    assert names(select_interfaces(["Ethernet"], [guid])) == ["{846EE342-7039-11DE}"]


def test_an_existing_interface_without_address_is_kept_empty() -> None:
    down = adapter("wlan0", 3)
    assert select_interfaces(["wlan0"], [ETH, down]) == [
        SelectedInterface("wlan0", 3, (), (), False)
    ]


@pytest.mark.parametrize("request_", ["eth9", "10.9.9.9", "", "not an interface"])
def test_unknown_explicit_interface_is_a_clear_error(request_: str) -> None:
    with pytest.raises(InterfaceError, match=r"choose from: lo .*eth0 "):
        select_interfaces([request_], [LO, ETH])


def test_ipv6_loopback_is_refused_with_advice() -> None:
    with pytest.raises(InterfaceError, match=r"127\.0\.0\.1"):
        select_interfaces(["::1"], [LO, ETH])


def test_zeroconf_gets_ipv4_addresses_and_ipv6_indexes() -> None:
    selection = select_interfaces((), [LO, ETH, WLAN, adapter("eth1", 9, "fd00::9")])
    assert zeroconf_interfaces(selection) == ["192.168.1.20", "10.0.0.7", 2, 9]
    assert zeroconf_interfaces(select_interfaces(["lo"], [LO])) == ["127.0.0.1"]


def test_loopback_addresses_are_advertised_only_on_loopback_alone() -> None:
    assert advertised_addresses(select_interfaces(["lo", "eth0"], [LO, ETH])) == (
        "192.168.1.20",
        "fe80::1",
    )
    assert advertised_addresses(select_interfaces(["lo"], [LO, ETH])) == ("127.0.0.1",)
