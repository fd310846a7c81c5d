"""The supervisor of a runtime's session actors, and the inline runner of blocking work
(``location_loads="inline"``): the parts of ``SessionExecution`` that are not its state."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from actors.kernel import Supervisor

if TYPE_CHECKING:
    from actors.session._execution import SessionExecution

__all__ = ["ExecutionSupervisor", "run_inline"]


async def run_inline(fn: Callable[[], Any]) -> Any:
    """Run blocking *fn* on the trio thread (``location_loads="inline"``)."""
    await trio.lowlevel.checkpoint()
    return fn()


class ExecutionSupervisor(Supervisor):
    """Supervises the session actors; on each (re)start resets the execution's
    directory, then runs its passivation sweep and its MCP sign-in host beside them."""

    kind = "execution"

    def __init__(self, execution: SessionExecution, **options: Any) -> None:
        super().__init__("execution", label="sessions", **options)
        self._execution = execution

    async def start_initial_children(self) -> None:
        self._execution._reset()
        assert self._nursery is not None
        self._nursery.start_soon(self._execution._sweep)
        self._nursery.start_soon(self._execution.mcp_oauth.run)
        self._execution.ready.set()
