"""Permission rules and their sans-IO evaluation.

Rules are evaluated per resource: the last rule whose permission and resource
patterns both match (``fnmatch`` wildcards) wins, and no match means ``ask``.
A configured ``deny`` is decided before saved approvals are consulted, so a
saved "always" can never override it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

__all__ = [
    "PermissionAction",
    "PermissionGate",
    "PermissionReply",
    "PermissionRequest",
    "PermissionRule",
    "SavedApprovals",
    "decide",
    "evaluate",
    "evaluate_resource",
    "is_wholly_denied",
    "rules_from_config",
]

PermissionAction: TypeAlias = Literal["allow", "deny", "ask"]
PermissionReply: TypeAlias = Literal["once", "always", "reject"]
_ACTIONS: frozenset[str] = frozenset({"allow", "deny", "ask"})


class PermissionRule(msgspec.Struct, frozen=True, kw_only=True):
    """One configured rule: *permission* and *pattern* are ``fnmatch`` wildcards."""

    permission: str
    action: PermissionAction
    pattern: str = "*"


class PermissionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A pending question to a client: may *agent* use *permission* on *resources*?

    ``agent`` is the effective agent of the provider turn that issued the call.
    """

    id: str
    session_id: str
    agent: str
    tool: str
    call_id: str
    permission: str
    resources: list[str]


class PermissionGate(Protocol):
    """Asks a client to resolve a permission request (the durable implementation
    stores the pending request and waits for a client's reply)."""

    async def ask(self, request: PermissionRequest) -> PermissionReply:
        """Wait for a reply to *request*.

        Cancellation abandons the wait; the implementation decides what happens
        to the pending request.
        """
        ...


class SavedApprovals(Protocol):
    """Per-project "always" approvals."""

    async def is_approved(self, project: str, permission: str, resource: str) -> bool:
        """Tell whether *resource* was approved "always" for *permission* in *project*."""
        ...

    async def save(self, project: str, permission: str, resource: str) -> None:
        """Remember an "always" approval of *resource* for *permission* in *project*."""
        ...


def evaluate_resource(
    rules: Sequence[PermissionRule], permission: str, resource: str
) -> PermissionAction:
    """Return the action of the last rule matching *permission* and *resource*, else ``ask``."""
    for rule in reversed(rules):
        if fnmatchcase(permission, rule.permission) and fnmatchcase(resource, rule.pattern):
            return rule.action
    return "ask"


def evaluate(
    rules: Sequence[PermissionRule],
    saved: Collection[tuple[str, str]],
    permission: str,
    resources: Iterable[str],
) -> PermissionAction:
    """Decide one call: any ``deny`` denies, every resource allowed allows, else ``ask``.

    *saved* holds ``(permission, resource)`` pairs approved "always"; it turns an
    ``ask`` into ``allow`` but never a configured ``deny``.
    """
    verdicts = [
        _with_saved(evaluate_resource(rules, permission, r), saved, permission, r)
        for r in resources
    ]
    if "deny" in verdicts:
        return "deny"
    if all(v == "allow" for v in verdicts):
        return "allow"
    return "ask"


def asking(rules: Sequence[PermissionRule], permission: str, resources: Iterable[str]) -> list[str]:
    """The *resources* whose rules say ``ask``: the only ones a saved approval can allow."""
    return [r for r in resources if evaluate_resource(rules, permission, r) == "ask"]


async def decide(
    rules: Sequence[PermissionRule],
    permission: str,
    resources: Sequence[str],
    *,
    approvals: SavedApprovals | None,
    project: str,
) -> PermissionAction:
    """Decide one use of *permission* on *resources* (``evaluate``), consulting the
    saved approvals of *project* only for the resources that would ask.

    Cancellation and failures propagate from *approvals*; nothing is recorded.
    """
    saved: set[tuple[str, str]] = set()
    if approvals is not None:
        for resource in asking(rules, permission, resources):
            if await approvals.is_approved(project, permission, resource):
                saved.add((permission, resource))
    return evaluate(rules, saved, permission, resources)


def _with_saved(
    action: PermissionAction, saved: Collection[tuple[str, str]], permission: str, resource: str
) -> PermissionAction:
    if action == "ask" and (permission, resource) in saved:
        return "allow"
    return action


def is_wholly_denied(rules: Sequence[PermissionRule], permission: str) -> bool:
    """Tell whether *permission* is denied for every resource (so the tool can be hidden)."""
    if evaluate_resource(rules, permission, "*") != "deny":
        return False
    last_any = max(
        (
            i
            for i, r in enumerate(rules)
            if r.pattern == "*" and fnmatchcase(permission, r.permission)
        ),
        default=-1,
    )
    return not any(
        fnmatchcase(permission, r.permission) and r.action != "deny" for r in rules[last_any + 1 :]
    )


def rules_from_config(config: Mapping[str, Any] | str | None) -> list[PermissionRule]:
    """Translate OpenCode's ``permission`` shape into rules, in file order.

    ``"allow"`` means every permission; ``{"edit": "deny", "bash": {"git *": "allow"}}``
    gives one rule per entry. Raises ``ValueError`` for an unknown action.
    """
    if config is None:
        return []
    if isinstance(config, str):
        return [PermissionRule(permission="*", action=_action(config))]
    rules: list[PermissionRule] = []
    for permission, value in config.items():
        if isinstance(value, Mapping):
            rules.extend(
                PermissionRule(permission=permission, pattern=str(p), action=_action(a))
                for p, a in value.items()
            )
        else:
            rules.append(PermissionRule(permission=permission, action=_action(value)))
    return rules


def _action(value: object) -> PermissionAction:
    if not isinstance(value, str) or value not in _ACTIONS:
        raise ValueError(f"Unknown permission action: {value!r}")
    return value  # type: ignore[return-value]
