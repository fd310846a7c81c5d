"""Names a package exports but imports only when first asked for (PEP 562): what keeps a
module that loads a heavy dependency (pluggy, OpenTelemetry's SDK, psycopg) out of a
process that never uses it."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_attribute"]


def lazy_attribute(package: str, homes: Mapping[str, str], name: str) -> Any:
    """The attribute *name* of *package*, imported from its module in *homes* (name ->
    module): a package's module-level ``__getattr__``. Raises ``AttributeError`` for a
    name *homes* does not hold, and what importing its module raises."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(import_module(home), name)
