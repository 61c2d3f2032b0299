"""The local control socket: how commands on this machine talk to the agent.

A Unix socket in the state directory, mode 0600, so only the user who runs
the agent can ask it anything. Requests and replies are CBOR maps in the
same length-prefixed frames as the peer protocol, without encryption (the
file permissions are the access control):

    request  {"op": str, "args": {...}}
    reply    {"ok": true, "result": {...}}  |  {"ok": false, "error": str}

Operations are answered by a ``ControlHandler`` (the agent, which asks the
``gleam_control_request`` hook), so plugins add operations the same way the
core does. An operation may also answer
with a :class:`Handoff`: it then takes the connection over (CUDA forwarding
turns it into a stream of session envelopes) and no reply frame is sent.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import logging
import os
import socket
from pathlib import Path
from typing import Any, Protocol

import cbor2
import trio

from gleam.peer.failures import NO_AGENT, UserError
from gleam.peer.protocol.framing import FrameBuffer, frame

log = logging.getLogger("gleam.control")

# Control requests are small; a bound keeps a confused client from making
# the agent buffer without limit.
MAX_CONTROL_FRAME = 4 * 1024 * 1024
REQUEST_TIMEOUT = 30.0


class RequestError(Exception):
    """A control request was refused; the message is shown to the user."""


class AgentNotRunning(UserError):
    """No agent answers on the control socket of a state directory."""

    status = NO_AGENT


class AgentStopped(AgentNotRunning):
    """The agent went away in the middle of a request (it was stopped or killed)."""


class ControlError(UserError):
    """The agent answered a request with an error."""


class AgentAlreadyRunning(Exception):
    pass


class Handoff:
    """A request's answer that takes over its connection.

    Return one from ``gleam_control_request``; the control server then calls
    ``take`` instead of sending a reply, and stops reading the connection.
    """

    async def take(self, stream: trio.SocketStream, buffered: bytes) -> None:
        """Own ``stream`` from now on. ``buffered`` holds bytes the client sent after
        the request, already read from the socket. The stream is closed when
        this returns unless its socket was detached."""
        raise NotImplementedError


# ---------------------------------------------------------------- server side


class ControlHandler(Protocol):
    """Who answers the operations: all the control server needs of the agent."""

    def control_request(self, op: str, args: dict[str, Any]) -> object:
        """The answer to ``op``: a result, a ``Handoff``, None for an unknown
        operation, or an awaitable of one of these. Raises RequestError to refuse."""


def _claim_socket_path(path: Path) -> None:
    """Remove a stale socket, or refuse if a live agent still answers there."""
    if not path.exists() and not path.is_symlink():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # nobody listens: left over from a crash
        return
    finally:
        probe.close()
    raise AgentAlreadyRunning(
        f"an agent is already running with state directory {path.parent}; "
        "stop it first or pass another --state-dir"
    )


async def open_control_listener(path: Path) -> trio.SocketListener:
    _claim_socket_path(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    # umask makes the socket 0600 from the moment it exists; chmod is a
    # second line in case the platform ignores umask for sockets.
    old = os.umask(0o177)
    try:
        try:
            await sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(16)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


async def _reply(stream: trio.abc.Stream, body: dict[str, Any]) -> None:
    await stream.send_all(frame(cbor2.dumps(body)))


async def _dispatch(handler: ControlHandler, request: object) -> dict[str, Any] | Handoff:
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        return {"ok": False, "error": "malformed request: expected {'op': str, 'args': map}"}
    op = request["op"]
    args = request.get("args") or {}
    if not isinstance(args, dict):
        return {"ok": False, "error": "malformed request: 'args' must be a map"}
    try:
        result = handler.control_request(op, args)
        if inspect.isawaitable(result):
            result = await result
    except RequestError as exc:
        return {"ok": False, "error": str(exc)}
    if result is None:
        return {"ok": False, "error": f"unknown operation {op!r}"}
    if isinstance(result, Handoff):
        return result
    return {"ok": True, "result": result}


def _unread(buffer: FrameBuffer, last_chunk: bytes) -> bytes:
    """Bytes received after the frame just taken from ``buffer``.

    More bytes are read only when no whole frame is buffered, so whatever is
    left once a frame has been taken arrived in the last chunk read.
    """
    left = buffer.pending()
    return last_chunk[len(last_chunk) - left :] if 0 < left <= len(last_chunk) else b""


async def serve_control_client(handler: ControlHandler, stream: trio.abc.Stream) -> None:
    """Answer requests on one control connection until the client closes."""
    buffer = FrameBuffer(MAX_CONTROL_FRAME)
    data: bytes | bytearray = b""
    async with stream:
        while True:
            body = buffer.next_frame()
            if body is None:
                data = await stream.receive_some(65536)
                if not data:
                    return
                try:
                    buffer.feed(data)
                except Exception as exc:  # oversized frame: nothing sane follows
                    log.warning("control client dropped: %s", exc)
                    return
                continue
            try:
                request = cbor2.loads(body)
            except Exception:
                await _reply(stream, {"ok": False, "error": "malformed request (not CBOR)"})
                return
            answer = await _dispatch(handler, request)
            if isinstance(answer, Handoff):
                await answer.take(stream, _unread(buffer, data))  # type: ignore[arg-type]
                return
            await _reply(stream, answer)


# ---------------------------------------------------------------- client side


START_HINT = "gleam-peer up"


def _connect(sock: socket.socket, socket_path: Path) -> None:
    try:
        sock.connect(str(socket_path))
    except FileNotFoundError as exc:
        raise AgentNotRunning(
            f"no agent is running (no control socket at {socket_path}); "
            f"start one with `{START_HINT}`"
        ) from exc
    except TimeoutError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK):
            raise AgentNotRunning(
                f"no agent is running (nothing answers at {socket_path}; a stopped agent "
                f"left it); start one with `{START_HINT}`"
            ) from exc
        raise AgentNotRunning(
            f"cannot reach the agent at {socket_path}: {exc.strerror or exc}; "
            "check the path and its permissions"
        ) from exc


def _receive_reply(sock: socket.socket, socket_path: Path) -> bytes:
    buffer = FrameBuffer(MAX_CONTROL_FRAME * 16)
    while (body := buffer.next_frame()) is None:
        data = sock.recv(1 << 20)
        if not data:
            raise AgentStopped(
                f"the agent at {socket_path.parent} closed the control connection without "
                f"answering (it stopped?); start it again with `{START_HINT}`"
            )
        buffer.feed(data)
    return body


def request(
    socket_path: Path, op: str, args: dict[str, Any] | None = None, timeout: float = REQUEST_TIMEOUT
) -> Any:
    """Send one request to the agent at ``socket_path`` and return its result.

    Blocking, for the CLI and tools. Raises AgentNotRunning (AgentStopped when
    the agent went away mid-request) or ControlError.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        _connect(sock, socket_path)
        try:
            sock.sendall(frame(cbor2.dumps({"op": op, "args": args or {}})))
            body = _receive_reply(sock, socket_path)
        except TimeoutError:
            raise
        except OSError as exc:  # reset or broken pipe: the agent died under us
            raise AgentStopped(
                f"the agent at {socket_path.parent} stopped while answering ({exc.strerror}); "
                f"start it again with `{START_HINT}`"
            ) from exc
    except TimeoutError as exc:
        raise ControlError(f"the agent did not answer {op!r} within {timeout:.0f} s") from exc
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    reply = cbor2.loads(body)
    if not reply.get("ok"):
        raise ControlError(str(reply.get("error", "unknown error")))
    return reply.get("result")
