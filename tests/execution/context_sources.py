"""Context Sources read from small files in the working directory, for crash tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runtime.context import SystemContext, SystemContextRegistry


def file_context(work_dir: str) -> Callable[[str], SystemContextRegistry]:
    """A context factory with ``test/mode`` and ``test/region`` read from ``<name>.txt``."""

    def make(directory: str) -> SystemContextRegistry:
        registry = SystemContextRegistry()

        def source(name: str) -> SystemContext:
            async def load() -> str:
                path = Path(work_dir) / f"{name}.txt"
                return path.read_text() if path.exists() else "unset"  # noqa: ASYNC240

            return SystemContext.make(
                f"test/{name}", str, load, lambda v: f"{name}: {v}", lambda v: f"{name} is now: {v}"
            )

        async def produce() -> list[SystemContext]:
            return [source("mode"), source("region")]

        registry.contribute("core/builtins", produce)
        return registry

    return make
