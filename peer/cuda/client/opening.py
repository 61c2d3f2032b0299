"""Opening a client session's server side: on a peer (cuda_open) or on this agent.

Both a program attaching (attach.py) and a session moving to another server
(relocate.py) open this way; a moving session passes the range it must keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gleam.peer.cuda.client.route import PendingOpen, ServeRefused, SessionManager
from gleam.peer.cuda.wire import dataconn
from gleam.peer.cuda.wire.channel import LoopbackChannel
from gleam.peer.cuda.wire.messages import CudaClose, CudaOpen, CudaOpened

if TYPE_CHECKING:
    from gleam.peer.cuda.client.facts import LocalServed
    from gleam.peer.cuda.wire.dataconn import DataConnection
    from gleam.peer.link import PeerLink

OPEN_TIMEOUT = 10.0


class OpenFailed(Exception):
    """The server side did not open; the message says who refused and why."""


async def open_remote(fw: SessionManager, link: PeerLink, session: int, program: str,
                      va: tuple[int, int] = (0, 0)) -> CudaOpened:
    """``cuda_open`` on ``link`` and its answer; raises OpenFailed."""
    wait = fw.pending[session] = PendingOpen(link, trio.Event())
    try:
        link.io.submit(CudaOpen(session=session, program=program,
                                client=fw.agent.config.name[:64], va_base=va[0], va_size=va[1]))
        with trio.move_on_after(OPEN_TIMEOUT):
            await wait.done.wait()
    finally:
        del fw.pending[session]
    answer = wait.answer
    if answer is None:
        link.io.submit(CudaClose(session=session, reason="the client stopped waiting"))
        raise OpenFailed(f"{link.name} did not answer within {OPEN_TIMEOUT:.0f} s")
    if isinstance(answer, str):
        raise OpenFailed(f"{link.name} refused: {answer}")
    if va[0] and (answer.va_base, answer.va_size) != va:
        link.io.submit(CudaClose(session=session, reason="not the address range asked for"))
        raise OpenFailed(f"{link.name} opened another address range")
    return answer


async def open_local(fw: SessionManager, session: int, program: str,
                     va: tuple[int, int] = (0, 0)
                     ) -> tuple[LocalServed, LoopbackChannel, DataConnection]:
    """A session on this agent's own backend, started (its channel's client is not
    set yet: no batch comes before it is), and the client's end of its data
    connection (an in-process pair); raises OpenFailed."""
    me = fw.agent.display_name
    channel = LoopbackChannel(fw.agent.node_id, me)
    try:
        served = await fw.open_served(session, channel, program, me, va=va)
    except ServeRefused as exc:
        raise OpenFailed(f"{me} refused: {exc}") from None
    try:
        data, server_end = dataconn.local_pair()
    except OSError as exc:
        served.stop("no data connection")
        raise OpenFailed(f"cannot open the session's data connection: {exc}") from None
    served.attach_data(server_end)
    return served, channel, data
