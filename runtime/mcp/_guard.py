"""The guard a local MCP server runs under, so that it never outlives Kittiwake.

Run as ``python -I -S _guard.py <kittiwake pid> <command> [args...]`` (it imports nothing
of Kittiwake's and nothing outside the standard library). The MCP client starts it in a
new session, so it leads the server's process group; it starts the server as its child
(which inherits the group and the guard's stdin, stdout and stderr, so messages flow
straight between Kittiwake and the server), then waits, with no polling, on three file
descriptors at once:

- a pidfd of Kittiwake: readable when Kittiwake's process ends, however it ends
  (``kill -9`` included: the kernel, not Kittiwake, makes it readable). The guard then
  sends SIGTERM to the whole group, SIGKILL after a grace, and exits;
- a pidfd of the server: when it exits, what is left of the group (its own children)
  gets the same treatment, and the guard exits with the server's status;
- a signal pipe: SIGTERM, SIGINT or SIGHUP sent to the guard alone is passed on to the
  group the same way.

The server's own process also gets ``PR_SET_PDEATHSIG`` (SIGKILL) tied to the guard,
which is single-threaded, so even a SIGKILL of the guard alone takes the server down.
The guard refuses to start the server if Kittiwake is already gone.
"""

from __future__ import annotations

import os
import select
import signal
import sys

__all__ = ["main"]

_GRACE = 2.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the forked child: be killed when the guard dies (Linux; a no-op elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _end_group(child: int, child_fd: int | None) -> None:
    """SIGTERM to the group (the guard ignores it), wait up to the grace for the server
    to go, then SIGKILL to the group, the guard included."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(0, signal.SIGTERM)
    except OSError:
        pass
    if child_fd is not None:
        select.select([child_fd], [], [], _GRACE)
    os.killpg(0, signal.SIGKILL)


def _status(raw: int) -> int:
    return os.waitstatus_to_exitcode(raw) % 256


def main(argv: list[str]) -> int:
    """Start the server of *argv* (``<parent pid> <command> [args...]``) and watch it."""
    if len(argv) < 2:
        sys.stderr.write("usage: _guard.py PARENT_PID COMMAND [ARGS...]\n")
        return 2
    parent = int(argv[0])
    try:
        parent_fd = os.pidfd_open(parent)
    except (ProcessLookupError, OSError):
        return 1
    if os.getppid() != parent:
        return 1  # Kittiwake ended before the pidfd was opened
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # lead a group of our own: killpg(0) must never reach the caller's
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)
    guard = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(parent_fd)
        os.close(wake_read)
        os.close(wake_write)
        _die_with_parent()
        if os.getppid() != guard:
            os._exit(1)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(argv[1], argv[1:])
        except OSError as exc:
            sys.stderr.write(f"cannot run {argv[1]!r}: {exc.strerror or exc}\n")
            sys.stderr.flush()
            os._exit(127)
    child_fd = os.pidfd_open(child)
    while True:
        ready, _, _ = select.select([parent_fd, child_fd, wake_read], [], [])
        if child_fd in ready:
            _, raw = os.waitpid(child, 0)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                os.killpg(0, signal.SIGTERM)  # the server's own children, if any
            except OSError:
                pass
            return _status(raw)
        if parent_fd in ready or wake_read in ready:
            _end_group(child, child_fd)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
