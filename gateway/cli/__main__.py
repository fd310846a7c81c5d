"""``python -m gateway.cli``: the ``kittiwake`` command, the collector left as it is."""

from gateway.cli import main

raise SystemExit(main())
