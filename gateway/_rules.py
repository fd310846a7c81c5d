"""The app's URL rule: Werkzeug's, with URL builders compiled on first use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quart.routing import QuartRule

__all__ = ["LazyBuildRule"]


class LazyBuildRule(QuartRule):
    """A route rule whose URL builders compile when first asked to build, not when added.

    Werkzeug compiles two URL-building functions per rule (through ``ast`` and ``compile``)
    as the rule is added: for the gateway's 56 routes, 25-40 ms of every start-up. The
    gateway matches requests and builds no URLs from rules; should anything build one
    (``url_for``), that rule's builder compiles then and replaces the stand-in. Matching is
    untouched. A failure to compile raises from the build that asked for it.
    """

    def _compile_builder(self, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        compile_now = super()._compile_builder
        name = "_build_unknown" if append_unknown else "_build"

        def build_on_first_use(rule: LazyBuildRule, **values: Any) -> tuple[str, str]:
            builder = compile_now(append_unknown).__get__(rule, None)
            setattr(rule, name, builder)
            return builder(**values)

        return build_on_first_use
