"""What a GitHub Actions event asks: the trigger of ``kittiwake github run`` read from
``GITHUB_EVENT_NAME`` and the event's JSON at ``GITHUB_EVENT_PATH``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

__all__ = [
    "DEFAULT_MENTIONS",
    "EVENTS",
    "EventError",
    "Trigger",
    "mentioned",
    "prompt_of",
    "read_trigger",
]

DEFAULT_MENTIONS: Final = ("/kittiwake", "/kw")
EVENTS: Final = (
    "issue_comment", "pull_request_review_comment", "issues", "pull_request",
    "workflow_dispatch", "schedule",
)  # fmt: skip
_MAX_EVENT_BYTES: Final = 25 * 1024 * 1024


class EventError(Exception):
    """The event cannot be acted on: the message is its one log line."""


class Trigger(msgspec.Struct, frozen=True, kw_only=True):
    """One event's request.

    ``number`` is the issue's or pull request's (None for ``workflow_dispatch`` and
    ``schedule``); ``comment_id`` the comment's that asked (None for the others); ``text``
    what the person wrote (the comment, or the issue's or pull request's title and body).
    """

    event: str
    repository: str
    default_branch: str
    number: int | None = None
    pull_request: bool = False
    comment_id: int | None = None
    review_comment: bool = False
    author: str | None = None
    title: str = ""
    body: str = ""
    text: str = ""
    path: str | None = None
    line: int | None = None
    diff_hunk: str | None = None
    head_ref: str | None = None
    head_repository: str | None = None


def _login(user: Any) -> str | None:
    return user.get("login") if isinstance(user, dict) else None


def read_trigger(env: Mapping[str, str], *, max_bytes: int = _MAX_EVENT_BYTES) -> Trigger:
    """The trigger *env* (GitHub's variables) names. Raises ``EventError``: no event, an
    event this command does not handle, an event file that cannot be read or lacks what
    its kind carries."""
    name = env.get("GITHUB_EVENT_NAME", "")
    path = env.get("GITHUB_EVENT_PATH", "")
    repository = env.get("GITHUB_REPOSITORY", "")
    if not name or not path:
        raise EventError(
            "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (a GitHub Actions run sets them)"
        )
    if name not in EVENTS:
        raise EventError(
            f"the event {name} is not one kittiwake github run handles ({', '.join(EVENTS)})"
        )
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise EventError(f"cannot read the event {path}: {exc.strerror or exc}") from None
    try:
        payload = msgspec.json.decode(data[:max_bytes])
    except msgspec.DecodeError as exc:
        raise EventError(f"the event {path} is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise EventError(f"the event {path} is not a JSON object")
    repo = payload.get("repository") or {}
    repository = repository or repo.get("full_name", "")
    if "/" not in repository:
        raise EventError("GITHUB_REPOSITORY (owner/name) must be set")
    base = {
        "event": name, "repository": repository,
        "default_branch": repo.get("default_branch") or "main",
    }  # fmt: skip
    try:
        return _trigger(name, payload, base)
    except (KeyError, TypeError) as exc:
        raise EventError(f"the {name} event lacks {exc}") from None


def _trigger(name: str, p: dict[str, Any], base: dict[str, Any]) -> Trigger:
    if name == "issue_comment":
        issue, comment = p["issue"], p["comment"]
        return Trigger(
            **base, number=int(issue["number"]), pull_request="pull_request" in issue,
            comment_id=int(comment["id"]), author=_login(comment.get("user")),
            title=issue.get("title") or "", body=issue.get("body") or "",
            text=comment["body"] or "",
        )  # fmt: skip
    if name == "pull_request_review_comment":
        pr, comment = p["pull_request"], p["comment"]
        head = pr.get("head") or {}
        return Trigger(
            **base, number=int(pr["number"]), pull_request=True, comment_id=int(comment["id"]),
            review_comment=True, author=_login(comment.get("user")),
            title=pr.get("title") or "", body=pr.get("body") or "", text=comment["body"] or "",
            path=comment.get("path"), line=comment.get("line") or comment.get("original_line"),
            diff_hunk=comment.get("diff_hunk"), head_ref=head.get("ref"),
            head_repository=(head.get("repo") or {}).get("full_name"),
        )  # fmt: skip
    if name in ("issues", "pull_request"):
        item = p["issue" if name == "issues" else "pull_request"]
        head = item.get("head") or {}
        title, body = item.get("title") or "", item.get("body") or ""
        return Trigger(
            **base, number=int(item["number"]), pull_request=name == "pull_request",
            author=_login(p.get("sender")) or _login(item.get("user")), title=title, body=body,
            text=f"{title}\n\n{body}".strip(), head_ref=head.get("ref"),
            head_repository=(head.get("repo") or {}).get("full_name"),
        )  # fmt: skip
    return Trigger(**base, author=_login(p.get("sender")))  # workflow_dispatch, schedule


def mentioned(text: str, mentions: Sequence[str]) -> str | None:
    """The first of *mentions* *text* holds as a word (``/kw`` but not ``/kwx``), else None."""
    for mention in mentions:
        if re.search(rf"(?<![\w/]){re.escape(mention)}(?![\w-])", text, re.IGNORECASE):
            return mention
    return None


def prompt_of(trigger: Trigger, mentions: Sequence[str], prompt: str | None) -> str:
    """The session's prompt: *prompt* (the action's input) when given, else what the
    person wrote without the mention; with the issue's or pull request's title and body
    and, for a review comment, its file, line and diff hunk as context."""
    kind: Literal["pull request", "issue"] = "pull request" if trigger.pull_request else "issue"
    asked = prompt
    if asked is None:
        asked = trigger.text
        for mention in mentions:
            asked = re.sub(
                rf"(?<![\w/]){re.escape(mention)}(?![\w-])", "", asked, flags=re.IGNORECASE
            )
        asked = asked.strip()
    if trigger.number is None:
        return asked
    lines = [
        asked,
        "",
        f"Context: {kind} #{trigger.number} of {trigger.repository}: {trigger.title}",
    ]
    if trigger.body and trigger.comment_id is not None:
        lines += ["", trigger.body]
    if trigger.review_comment and trigger.path:
        where = f"{trigger.path}:{trigger.line}" if trigger.line else trigger.path
        lines += ["", f"The comment is on {where}."]
        if trigger.diff_hunk:
            lines += ["", "```diff", trigger.diff_hunk, "```"]
    return "\n".join(lines)
