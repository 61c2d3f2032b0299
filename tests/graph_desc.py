"""Graph descriptions (cffi_build/include/gl_graph.h) built in Python, as the interposer
builds them, for the executor's tests and fuzzing."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAGIC = 0x52474C47
VERSION = 1
HEAD = struct.Struct("<IHHIIIIII")
NODE_HEAD = struct.Struct("<B3xI")
EDGE = struct.Struct("<II")
UNION = 72
EMPTY, KERNEL, MEMSET, COPY, EVENT_RECORD, EVENT_WAIT, COND = range(7)
IF, WHILE, SWITCH = range(3)  # a conditional node's type
HANDLE = struct.Struct("<QII")  # a conditional handle: its value, default and flags


@dataclass
class Node:
    kind: int
    stage: int = 0
    body: bytes = b""  # the union's bytes (padded to 72)
    params: bytes = b""  # a kernel's packed parameters
    bodies: list[Graph] = field(default_factory=list)  # a conditional node's

    def encode(self, params_off: int, bodies_off: int = 0, bodies_len: int = 0) -> bytes:
        body = self.body
        if self.kind == KERNEL:  # the offset is the description's
            body = body[:48] + struct.pack("<II", params_off, len(self.params))
        if self.kind == COND and len(body) >= 12:  # so is the bodies' place
            body = body[:12] + struct.pack("<II", bodies_off, bodies_len) + body[20:]
        return NODE_HEAD.pack(self.kind, self.stage) + body.ljust(UNION, b"\0")


def kernel(func: int, grid: tuple[int, int, int], block: tuple[int, int, int], params: bytes,
           stage: int = 0, shared: int = 0, cluster: tuple[int, int, int] = (0, 0, 0)) -> Node:
    body = struct.pack("<Q3I3I3II", func, *grid, *block, *cluster, shared)
    return Node(KERNEL, stage, body, params)


def memset(dst: int, width: int, value: int, elem: int = 1, pitch: int | None = None,
           height: int = 1, stage: int = 0) -> Node:
    pitch = width * elem if pitch is None else pitch
    return Node(MEMSET, stage, struct.pack("<QQQQII", dst, pitch, width, height, value, elem))


def copy(dst: int, src: int, width: int, height: int = 1, depth: int = 1,
         src_pitch: int | None = None, dst_pitch: int | None = None,
         src_height: int | None = None, dst_height: int | None = None, stage: int = 0) -> Node:
    sp = width if src_pitch is None else src_pitch
    dp = width if dst_pitch is None else dst_pitch
    sh = height if src_height is None else src_height
    dh = height if dst_height is None else dst_height
    return Node(COPY, stage, struct.pack("<9Q", src, sp, sh, dst, dp, dh, width, height, depth))


def event(kind: int, handle: int, stage: int = 0) -> Node:
    return Node(kind, stage, struct.pack("<Q", handle))


def cond(handle: int, type_: int, bodies: list[Graph], stage: int = 0) -> Node:
    """A conditional node: handle is an index into the root's handles."""
    return Node(COND, stage, struct.pack("<III", handle, type_, len(bodies)), bodies=bodies)


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)
    stages: int | None = None
    handles: list[tuple[int, int, int]] = field(default_factory=list)

    def encode(self) -> bytes:
        stages = self.stages if self.stages is not None else \
            max((n.stage for n in self.nodes), default=0) + 1
        params, offs, bodies, places = b"", [], b"", []
        for n in self.nodes:
            offs.append(len(params))
            params += n.params
            mine = b"".join(b.encode() for b in n.bodies)
            places.append((len(bodies), len(mine)))
            bodies += mine
        out = HEAD.pack(MAGIC, VERSION, 0, len(self.nodes), len(self.edges), stages,
                        len(params), len(self.handles), len(bodies))
        out += b"".join(n.encode(o, *p) for n, o, p in zip(self.nodes, offs, places,
                                                            strict=True))
        out += b"".join(EDGE.pack(a, b) for a, b in self.edges)
        out += b"".join(HANDLE.pack(*h) for h in self.handles)
        return out + params + bodies
