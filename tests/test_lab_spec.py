"""`lab up`'s words: --hosts, --link NAME=RATE/RTT, --speed NAME=FACTOR."""

import pytest

from gleam.peer.lab.spec import LinkSpec, SpecError, host_names, parse_links, parse_speeds

NAMES = host_names(3)


def test_links_take_rates_and_rtts_in_their_units():
    links = parse_links(["h1=100mbit/3ms", "h2=1gbit/500us", "h3=/2ms"], NAMES)
    assert links == {"h1": LinkSpec(100.0, 3.0), "h2": LinkSpec(1000.0, 0.5),
                     "h3": LinkSpec(None, 2.0)}
    assert parse_links(["all=10mbit"], NAMES) == {n: LinkSpec(10.0, 0.0) for n in NAMES}


@pytest.mark.parametrize("bad", ["h9=1mbit/1ms", "h1", "h1=fast/1ms", "h1=100/3ms",
                                 "h1=0mbit", "h1=1mbit/1h", "h1=1mbit/20s"])
def test_bad_links_say_what_is_wrong(bad):
    with pytest.raises(SpecError):
        parse_links([bad], NAMES)


def test_speeds_are_slowdowns():
    assert parse_speeds(["h3=4", "all=1"], NAMES) == {"h1": 1.0, "h2": 1.0, "h3": 1.0}
    assert parse_speeds(["h2=2.5"], NAMES) == {"h2": 2.5}
    for bad in ("h2=0.5", "h2=fast", "h4=2"):
        with pytest.raises(SpecError):
            parse_speeds([bad], NAMES)


def test_host_count_is_bounded():
    assert host_names(2) == ["h1", "h2"]
    for bad in (0, 33):
        with pytest.raises(SpecError):
            host_names(bad)
