from __future__ import annotations

import actors


def public_names(module: object) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("actors.")
    ]


def test_all_is_sorted_and_complete() -> None:
    assert actors.__all__ == sorted(actors.__all__)
    assert set(public_names(actors)) <= set(actors.__all__)
    for name in actors.__all__:
        assert hasattr(actors, name), name


def test_errors_share_one_root() -> None:
    for name in ("ActorCrashed", "ActorStopped", "Escalation", "ActorNotFound", "DuplicateActor"):
        assert issubclass(getattr(actors, name), actors.ActorError)
