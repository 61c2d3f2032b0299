"""Run discovery alone and print what it sees, one JSON object a line.

    python -m gleam.discovery.probe --name alice --port 47470 --interface lo

Used by the network-namespace tests and handy for checking a LAN by hand. Exits on
SIGINT or SIGTERM (after the mDNS goodbye) or after ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import secrets
import signal
import socket
import sys
from collections.abc import Sequence

import trio

from gleam.discovery.adverts import (
    DiscoveryEvent,
    DuplicateNodeId,
    LocalAdvert,
    PeerFound,
    PeerGone,
    PeerUpdated,
)
from gleam.discovery.interfaces import InterfaceError
from gleam.discovery.mdns import DiscoveryError, MdnsDiscovery

_KINDS = {
    PeerFound: "found", PeerUpdated: "updated", PeerGone: "gone", DuplicateNodeId: "duplicate"
}


def _print(record: dict[str, object]) -> None:
    print(json.dumps(record, sort_keys=True), flush=True)


def event_record(event: DiscoveryEvent) -> dict[str, object]:
    record: dict[str, object] = {"event": _KINDS[type(event)]}
    if isinstance(event, PeerGone):
        record.update(instance=event.instance, node_id=event.node_id)
    else:
        record["advert"] = dataclasses.asdict(event.advert)
    return record


async def probe(discovery: MdnsDiscovery, duration: float | None) -> None:
    send, receive = trio.open_memory_channel[DiscoveryEvent](0)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            instance = await nursery.start(discovery.run, send)
            _print({
                "event": "ready",
                "instance": instance,
                "interfaces": list(discovery.interfaces),
                "addresses": list(discovery.addresses),
                "node_id": discovery.local.node_id,
            })

            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            if duration is not None:
                nursery.cancel_scope.deadline = trio.current_time() + duration
            async for event in receive:
                _print(event_record(event))
    _print({"event": "stopped"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gleam.discovery.probe", description=__doc__)
    parser.add_argument("--name", default=socket.gethostname())
    parser.add_argument("--node-id", default=secrets.token_hex(16))
    parser.add_argument("--mesh-id", default="0" * 16)
    parser.add_argument("--version", type=int, default=1)
    parser.add_argument("--port", type=int, default=47470)
    parser.add_argument("--interface", action="append", default=[], metavar="IF")
    parser.add_argument("--rescan", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        local = LocalAdvert(args.name, args.node_id, args.mesh_id, args.version, args.port)
        discovery = MdnsDiscovery(local, interfaces=args.interface, rescan_interval=args.rescan)
        trio.run(probe, discovery, args.duration)
    except (ValueError, InterfaceError, DiscoveryError) as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
