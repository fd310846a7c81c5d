"""``kittiwake acp``'s connection: the protocol on standard input and output, nothing else.

``protocol_streams`` moves the client's pipes to descriptors of their own before anything
else runs: descriptor 0 then reads ``/dev/null`` and descriptor 1 writes to standard error,
so a library's stray print, or a child process inheriting them, can neither read the
client's messages nor write among the agent's. Logs go to standard error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from gateway.acp._agent import AcpAgent, AgentOptions
from gateway.acp._backend import Backend
from gateway.acp._rpc import DEFAULT_MAX_LINE, DEFAULT_MAX_PENDING, Connection

__all__ = ["protocol_streams", "serve_acp"]


@contextmanager
def protocol_streams() -> Iterator[tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]]:
    """The client's input and output as trio streams on descriptors of their own, with
    descriptors 0 and 1 pointed away (see the module docstring). On exit the streams are
    closed (``FdStream`` puts back the blocking mode it changed)."""
    sys.stdout.flush()
    given_in, given_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    receive, send = trio.lowlevel.FdStream(given_in), trio.lowlevel.FdStream(given_out)
    try:
        yield receive, send
    finally:
        receive.close()
        send.close()


async def serve_acp(
    backend: Backend, options: AgentOptions, receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream, *, max_line: int = DEFAULT_MAX_LINE,
    max_pending: int = DEFAULT_MAX_PENDING,
) -> None:  # fmt: skip
    """Serve one ACP client on *receive* / *send* with *backend* until the client closes its
    end. Cancellation stops serving; prompts still running are interrupted by the
    runtime's own shutdown (embedded) or left to the server (attached)."""
    conn = Connection(receive, send, max_line=max_line, max_pending=max_pending)
    await AcpAgent(conn, backend, options).serve()
