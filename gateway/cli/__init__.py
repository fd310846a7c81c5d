"""The ``kittiwake`` command line: its commands, options, the terminal's answer to ``run``,
models, credentials and configuration, the telemetry reports.

``python -m gateway.cli`` runs it with the cyclic collector left as it is (``python -m
gateway`` pauses it during start-up).
"""

from gateway.cli._main import main as main

__all__ = ["main"]
