"""Registration of the built-in Location-wide contributions."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Mapping
from typing import Final

import trio

from runtime.context._builtins import (
    _host_today,
    date_source,
    environment_source,
    find_git_repository,
)
from runtime.context._instructions import instructions_producer
from runtime.context._registry import ContributionHandle, SystemContextRegistry
from runtime.context._system import SystemContext

__all__ = [
    "BUILTINS_CONTRIBUTION",
    "INSTRUCTIONS_CONTRIBUTION",
    "contribute_core_context",
]

BUILTINS_CONTRIBUTION: Final = "core/builtins"
INSTRUCTIONS_CONTRIBUTION: Final = "core/instructions"


def contribute_core_context(
    registry: SystemContextRegistry,
    *,
    directory: str | os.PathLike[str],
    project_root: str | os.PathLike[str],
    config_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    today: Callable[[], datetime.date] = _host_today,
    platform: str = sys.platform,
    is_git_repo: bool | None = None,
) -> list[ContributionHandle]:
    """Contribute ``core/builtins`` (environment, date) and ``core/instructions``.

    Never blocks. Both producers observe the filesystem in worker threads at each
    registry load (git detection only when ``is_git_repo`` is ``None``). Closing the
    returned handles withdraws both contributions.

    Raises:
      DuplicateContextKeyError: either contribution key is already registered.
    """

    def sources(git: bool) -> list[SystemContext]:
        environment = environment_source(
            directory=directory, workspace_root=project_root, platform=platform, is_git_repo=git
        )
        return [environment, date_source(today=today)]  # the date is read at each load

    async def builtins() -> list[SystemContext]:
        return sources(await trio.to_thread.run_sync(find_git_repository, directory))

    # With the git flag known, the sources are values: no task per registry load.
    fixed = None if is_git_repo is None else sources(is_git_repo)

    instructions = instructions_producer(
        directory=directory, project_root=project_root, config_dir=config_dir, env=env
    )
    return [
        registry.contribute(BUILTINS_CONTRIBUTION, builtins if fixed is None else fixed),
        registry.contribute(INSTRUCTIONS_CONTRIBUTION, instructions),
    ]
