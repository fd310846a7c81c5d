"""A test's hold on one ``kittiwake serve --workers`` worker before it starts.

With this directory on ``PYTHONPATH`` and ``KITTIWAKE_TEST_HOLD=<port>:<slot>``, the Python
process of the worker of that slot (its ``--worker-slot`` argument) connects to
127.0.0.1:<port> before anything else runs, sends its pid and a newline, and waits until
the test closes the connection (then it starts as usual) or kills it. Every other process
starts as usual. Python imports ``sitecustomize`` at start-up (the ``site`` module).
"""

from __future__ import annotations

import os
import socket
import sys


def _hold() -> None:
    spec = os.environ.get("KITTIWAKE_TEST_HOLD")
    if not spec or "--worker-slot" not in sys.argv[:-1]:
        return
    port, slot = spec.split(":")
    if sys.argv[sys.argv.index("--worker-slot") + 1] != slot:
        return
    with socket.create_connection(("127.0.0.1", int(port))) as held:
        held.sendall(f"{os.getpid()}\n".encode())
        while held.recv(64):
            pass


_hold()
