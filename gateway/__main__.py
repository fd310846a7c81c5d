"""``python -m gateway`` and the ``kittiwake`` console script: the CLI, started lean.

Start-up (imports, the web framework, the store's opening) allocates some 100,000 objects
that live as long as the process. The cyclic collector would walk them all, over and over,
while they are being built: about a tenth of start-up's CPU. So the collector is paused
from here until ``gateway.cli`` says start-up is done (the server is accepting, or a client
command has begun); then ``gc.freeze()`` moves everything alive into the permanent
generation, which later collections skip, and the collector resumes (a serving process's
with a larger young generation: ``gateway._collector``).

``python -m gateway.cli`` runs the same CLI with the collector left as it is.
"""

from __future__ import annotations

import gc

__all__ = ["main"]


def main() -> int:
    """Run the ``kittiwake`` command with start-up's collector paused; returns the exit status.

    A failure to import the CLI resumes the collector and raises.
    """
    gc.disable()
    try:
        from gateway import cli
    except BaseException:
        gc.enable()
        raise
    return cli.main(collector_paused=True)


if __name__ == "__main__":
    raise SystemExit(main())
