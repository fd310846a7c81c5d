"""Every test and simulation reads only the configuration and credentials it sets up.

The developer's own ``~/.config/kittiwake`` (or ``$XDG_CONFIG_HOME``), data dir and
``KITTIWAKE_*`` variables must neither change what a test sees nor be written by it (a
``PATCH /global/config`` in the gateway tests writes the global file). Subprocesses inherit
the patched environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check properties, not the machine's speed: on a loaded 2-core machine input
# generation and single examples take longer than Hypothesis's defaults allow (its too_slow
# health check failed two tests at a load average of 12).
settings.register_profile("kittiwake", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kittiwake")

pytest_plugins = ["tests.postgres"]  # a temporary PostgreSQL cluster for the tests that ask

_CONFIG_VARIABLES = (
    "KITTIWAKE_CONFIG",
    "KITTIWAKE_CONFIG_CONTENT",
    "KITTIWAKE_DISABLE_PROJECT_CONFIG",
    "KITTIWAKE_MODEL",
    "KITTIWAKE_DATA_DIR",
    "KITTIWAKE_SERVER_PASSWORD",
    "KITTIWAKE_CORS_ORIGINS",
)


@pytest.fixture(autouse=True)
def _isolated_configuration(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    for name in _CONFIG_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield home
