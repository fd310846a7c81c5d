from __future__ import annotations

import importlib
from types import ModuleType

import pytest

import actors

# The package and its rooms, each a public surface of its own.
SURFACES = (
    "actors",
    "actors.api",
    "actors.cluster",
    "actors.kernel",
    "actors.session",
    "actors.store",
)


def public_names(module: object) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("actors.")
    ]


@pytest.mark.parametrize("name", SURFACES)
def test_all_is_sorted_and_complete(name: str) -> None:
    surface: ModuleType = importlib.import_module(name)
    assert surface.__all__ == sorted(surface.__all__)
    assert set(public_names(surface)) <= set(surface.__all__)
    for exported in surface.__all__:
        assert hasattr(surface, exported), exported


def test_errors_share_one_root() -> None:
    for name in ("ActorCrashed", "ActorStopped", "Escalation", "ActorNotFound", "DuplicateActor"):
        assert issubclass(getattr(actors, name), actors.ActorError)
