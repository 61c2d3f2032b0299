"""The server's half of virtual memory management (src/exec/exec_vmm.c) in-process: the
glVmm* rows straight into an executor session on the host device.

- one allocation mapped twice is one memory (bytes written through one view read
  through the other), a mapping is no device memory until its access is READWRITE,
  and unmapping takes it away;
- an id or a range of another session is refused;
- the cuda backend's half over a stand-in driver: the driver's calls, and all given back;
- hypothesis: random sequences of the five rows with arguments off by a page, a
  granule, outside the session, over cuMemAlloc's memory or over a mapping, checked
  against a model of NVIDIA's rules: every call answers what the model says, and the
  accessible mappings stay readable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.client import journal
from gleam.peer.cuda.server import native

from .cuda_session import Session, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session
from .test_consistency import _envelope

G = 2 << 20  # the granularity (include/gl_vmm.h)
LIMIT = 1 << 26  # the backend's memory
RW = 3


@contextlib.contextmanager
def sessions(n: int = 1) -> Iterator[list[Session]]:
    be = native.HostBackend({}, memory_limit=LIMIT)
    ss = [Session(be, 1 << 26) for _ in range(n)]
    try:
        for s in ss:
            s.context()
        yield ss
    finally:
        for s in ss:
            s.close()
        be.close()


def base_of(s: Session) -> int:
    """The first granule of the session's range."""
    return (s.x.va_base + G - 1) // G * G


def result(s: Session, name: str, *args: int) -> int:
    r = s.run(rec(name, *args))
    assert r is not None
    return r[0]


def test_two_mappings_of_one_allocation_are_one_memory():
    with sessions() as (s,):
        a = base_of(s)
        b = a + 2 * G
        assert result(s, "glVmmCreate", 7, 2 * G) == 0
        assert result(s, "glVmmMap", a, 2 * G, 0, 7) == 0
        assert result(s, "glVmmMap", b, G, G, 7) == 0  # the second half only
        # mapped, no access yet: no device memory
        r = s.run(rec("glMemcpyDtoH", a, 16, 0))
        assert r is not None and r[0] != 0
        assert result(s, "glVmmSetAccess", a, 2 * G, RW) == 0
        assert result(s, "glVmmSetAccess", b, G, RW) == 0
        assert result(s, "glVmmRelease", 7) == 0  # mapped: the memory stays
        s.htod(a + G + 100, b"through the first view")
        assert s.dtoh(b + 100, 22) == b"through the first view"
        s.htod(b + 5, b"back")
        assert s.dtoh(a + G + 5, 4) == b"back"
        assert result(s, "glVmmUnmap", a, 2 * G) == 0
        r = s.run(rec("glMemcpyDtoH", a + G, 16, 0))
        assert r is not None and r[0] != 0
        assert s.dtoh(b + 100, 22) == b"through the first view"  # the other view stays
        assert result(s, "glVmmSetAccess", b, G, 0) == 0
        r = s.run(rec("glMemcpyDtoH", b, 16, 0))
        assert r is not None and r[0] != 0
        # cuMemFree of a mapping is refused; unmapping the last view frees the memory
        assert result(s, "glVmmSetAccess", b, G, RW) == 0
        assert s.run(rec("glMemFree", b)) is None
        assert s.sync()[1] != 0
        assert result(s, "glVmmUnmap", b, G) == 0
        assert result(s, "glVmmMap", b, G, 0, 7) != 0  # released and unmapped: gone


def test_another_sessions_allocation_or_range_is_refused():
    with sessions(2) as (one, two):
        assert result(one, "glVmmCreate", 9, G) == 0
        assert result(two, "glVmmMap", base_of(two), G, 0, 9) != 0  # the id is not two's
        assert result(two, "glVmmRelease", 9) != 0
        assert result(two, "glVmmCreate", 9, G) == 0  # two's own id 9 is another thing
        assert result(two, "glVmmMap", base_of(one), G, 0, 9) != 0  # one's addresses
        assert result(one, "glVmmMap", base_of(one), G, 0, 9) == 0


class Model:
    """What NVIDIA's rules answer for each row (src/exec/exec_vmm.c keeps them)."""

    def __init__(self, s: Session, alloc: tuple[int, int]) -> None:
        self.lo, self.hi = s.x.va_base, s.x.va_base + s.x.va_size
        self.alloc = alloc  # cuMemAlloc's memory, which no mapping may overlap
        self.live = alloc[1]
        self.allocs: dict[int, list[int]] = {}  # id: [size, released, maps]
        self.maps: dict[tuple[int, int], list[int]] = {}  # (ptr, size): [id, offset, access]

    def free_range(self, p: int, n: int) -> bool:
        if n <= 0 or p % G or n % G or p < self.lo or p + n > self.hi:
            return False
        if p < self.alloc[0] + self.alloc[1] and self.alloc[0] < p + n:
            return False
        return not any(q < p + n and p < q + m for q, m in self.maps)

    def drop(self, ident: int) -> None:
        size, released, maps = self.allocs[ident]
        if released and maps == 0:
            del self.allocs[ident]
            self.live -= size

    def create(self, ident: int, size: int) -> bool:
        if size <= 0 or size % G or ident in self.allocs or size > LIMIT - self.live:
            return False
        self.allocs[ident] = [size, 0, 0]
        self.live += size
        return True

    def release(self, ident: int) -> bool:
        if ident not in self.allocs or self.allocs[ident][1]:
            return False
        self.allocs[ident][1] = 1
        self.drop(ident)
        return True

    def map(self, p: int, n: int, offset: int, ident: int) -> bool:
        a = self.allocs.get(ident)
        if (a is None or a[1] or offset % G or offset > a[0] or n > a[0] - offset
                or not self.free_range(p, n)):
            return False
        self.maps[(p, n)] = [ident, offset, 0]
        a[2] += 1
        return True

    def unmap(self, p: int, n: int) -> bool:
        m = self.maps.pop((p, n), None)
        if m is None:
            return False
        self.allocs[m[0]][2] -= 1
        self.drop(m[0])
        return True

    def access(self, p: int, n: int, flags: int) -> bool:
        if (p, n) not in self.maps or flags not in (0, RW):
            return False
        self.maps[(p, n)][2] = flags
        return True


# Valid values drawn more often than each wrong one, so that sequences get far.
IDS = st.sampled_from([1, 1, 1, 2, 2, 3, 2**64 - 1])
SIZES = st.sampled_from([G, G, G, 2 * G, 2 * G, 0, 4096, G + 4096, 3 * G, LIMIT, 2**63])
OFFSETS = st.sampled_from([0, 0, 0, G, G, 4096, 2 * G, 2**63])
# the first granules of the session's range (cuMemAlloc's memory lies in the fifth),
# its end, and outside it
PLACES = st.sampled_from([k * G for k in range(7)] * 2
                         + [-G, 30 * G, 31 * G, 32 * G, 4096, G + 256])
ARGS = {
    "create": st.tuples(IDS, SIZES),
    "release": st.tuples(IDS),
    "map": st.tuples(PLACES, SIZES, OFFSETS, IDS),
    "unmap": st.tuples(PLACES, SIZES),
    "access": st.tuples(PLACES, SIZES, st.sampled_from([RW, RW, 0, 1, 7])),
}
# mappings and their access more often than creating and releasing
OPS = st.sampled_from(["create", "release", "map", "map", "map", "unmap", "access",
                       "access"]).flatmap(lambda name: ARGS[name].map(lambda a: (name, *a)))
ROW = {"create": "glVmmCreate", "release": "glVmmRelease", "map": "glVmmMap",
       "unmap": "glVmmUnmap", "access": "glVmmSetAccess"}


def step(s: Session, model: Model, op: tuple) -> None:
    name, *args = op
    args = [a % 2**64 for a in args]
    want = getattr(model, name)(*args)
    got = result(s, ROW[name], *args)
    assert (got == 0) == want, (op, got)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_random_calls_answer_as_the_rules_say(data):
    with sessions() as (s,):
        base = base_of(s)
        used = s.alloc(1 << 20, offset=base + 4 * G - s.x.va_base)
        model = Model(s, (used, 1 << 20))
        step(s, model, ("create", 1, 2 * G))
        step(s, model, ("create", 2, G))
        for _ in range(data.draw(st.integers(0, 16))):
            name, *args = data.draw(OPS)
            if name in ("map", "unmap", "access"):
                args[0] += base
                # often a range mapped already: unmapped, set, or mapped over
                if model.maps and data.draw(st.booleans()):
                    args[0], args[1] = data.draw(st.sampled_from(sorted(model.maps)))
            step(s, model, (name, *args))
        for (p, n), (_, _, flags) in model.maps.items():
            r = s.run(rec("glMemcpyDtoH", p + n - 8, 8, 0))
            assert r is not None and (r[0] == 0) == (flags == RW), (p, n, flags)



def test_a_session_with_vmm_memory_is_not_moved_silently():
    """Its journal stops at glVmmCreate: a move then reports the session lost rather
    than bring it up elsewhere without its mappings' memory (docs/consistency.md)."""
    record = rec("glVmmCreate", 1, G)
    j = journal.Journal(limit=1 << 20, backend="host")
    j.add(_envelope([record]), 16)
    assert j.broken is not None and "glVmmCreate" in j.broken


@needs_gcc
def test_the_cuda_backend_drives_the_drivers_calls(tmp_path):
    """On a GPU the same rows call the real driver's cuMemCreate, cuMemMap,
    cuMemSetAccess, cuMemUnmap and cuMemRelease (src/cudadev/cudadev_vmm.c; here a stand-in
    that counts mappings and unreleased handles), and closing the session gives
    everything back, a mapping left by the program included."""
    so, fake = build_stand_in(tmp_path, "", "int fake_state(int w);")
    with stand_in_session(so) as s:
        maps, held = fake.fake_state(0), fake.fake_state(1)
        a = base_of(s)
        assert result(s, "glVmmCreate", 5, 2 * G) == 0
        assert fake.fake_state(1) == held + 1
        assert result(s, "glVmmMap", a, 2 * G, 0, 5) == 0
        assert fake.fake_state(0) == maps + 1
        r = s.run(rec("glMemcpyDtoH", a, 8, 0))
        assert r is not None and r[0] != 0  # no access yet
        assert result(s, "glVmmSetAccess", a, 2 * G, RW) == 0
        assert s.dtoh(a + 8, 8) == bytes(8)
        assert result(s, "glVmmRelease", 5) == 0
        assert fake.fake_state(1) == held + 1  # mapped: kept
        assert result(s, "glVmmUnmap", a, 2 * G) == 0
        assert (fake.fake_state(0), fake.fake_state(1)) == (maps, held)
        assert result(s, "glVmmCreate", 6, G) == 0
        assert result(s, "glVmmMap", a + 4 * G, G, 0, 6) == 0  # left for the close
    assert (fake.fake_state(0), fake.fake_state(1)) == (0, 0)
