"""Benchmarks behind ``gleam-peer bench``: programs that print a table and JSON.

Each benchmark is a module listed in ``BENCHES`` that provides ``HELP`` (one
line), ``DESCRIPTION``, ``add_arguments(parser)`` and ``main(args) -> int``;
``--json`` is added for every one. Each figure is printed beside a reference
measured in the same run (``gleam.peer.bench.report``).
"""

BENCHES = {
    "wire": "gleam.peer.bench.wire",
    "gossip": "gleam.peer.bench.gossip",
    "compression": "gleam.peer.bench.compression",
    "batch": "gleam.peer.bench.batch",
    "calls": "gleam.peer.bench.calls",
    "cpu": "gleam.peer.bench.cpu",
    "ptx": "gleam.peer.bench.ptx",
    "cache": "gleam.peer.bench.cache",
    "scheduler": "gleam.peer.bench.scheduler",
    "consistency": "gleam.peer.bench.consistency",
    "remoting": "gleam.peer.bench.remoting",
}
