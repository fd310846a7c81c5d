"""Permission requests and questions as Block Kit messages (sans-IO): the buttons a request
is posted with, what a button's value names, and the message once it is answered."""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from runtime import events as ev

__all__ = [
    "ANSWER",
    "ASK",
    "DISMISS",
    "Pick",
    "answered_blocks",
    "decode_pick",
    "permission_blocks",
    "permission_outcome",
    "permission_text",
    "question_blocks",
    "question_text",
]

ASK: Final = "kw_permission_"
"""The prefix of a permission button's action id (``once``, ``always``, ``reject`` follow)."""
ANSWER: Final = "kw_answer"
"""The action id of a question's option."""
DISMISS: Final = "kw_dismiss"
"""The action id of a question's dismissal."""
_REPLIES: Final = {"once": "Allow once", "always": "Always allow", "reject": "Reject"}
_DONE: Final = {"once": "allowed once", "always": "allowed always", "reject": "rejected"}
_STYLES: Final = {"once": "primary", "reject": "danger"}


class Pick(msgspec.Struct, frozen=True, array_like=True):
    """What a button's value names: the session, the request, and for a question's option
    the question and the option (indexes)."""

    session_id: str
    request_id: str
    question: int = -1
    option: int = -1


def _value(pick: Pick) -> str:
    return msgspec.json.encode(pick).decode()


def decode_pick(value: str) -> Pick | None:
    """The pick *value* names; None for a value the bot did not make."""
    try:
        return msgspec.json.decode(value, type=Pick)
    except msgspec.DecodeError:
        return None


def _button(text: str, action: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button", "action_id": action, "value": value,
        "text": {"type": "plain_text", "text": text[:75]},
    }  # fmt: skip
    if style is not None:
        button["style"] = style
    return button


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def permission_text(asked: ev.PermissionAsked | ev.PermissionInfo) -> str:
    """A permission request in a line: the permission, its resources, and for a subagent's
    request, the subagent."""
    resources = ", ".join(f"`{r}`" for r in asked.resources[:5])
    who = f" ({asked.agent})" if isinstance(asked, ev.PermissionInfo) else ""
    return f":lock: *{asked.permission}*{who} {resources}".strip()


def permission_blocks(asked: ev.PermissionAsked | ev.PermissionInfo) -> list[dict[str, Any]]:
    """A permission request (the session's own event, or a subagent's request as listed):
    what it asks for, and a button per reply."""
    request = asked.request_id if isinstance(asked, ev.PermissionAsked) else asked.id
    value = _value(Pick(asked.session_id, request))
    buttons = [_button(t, ASK + r, value, _STYLES.get(r)) for r, t in _REPLIES.items()]
    return [_section(permission_text(asked)), {"type": "actions", "elements": buttons}]


def question_text(asked: ev.QuestionAsked) -> str:
    return "\n".join(f":question: *{q.header}* {q.question}" for q in asked.questions)


def question_blocks(asked: ev.QuestionAsked) -> list[dict[str, Any]]:
    """A question set: each question with a button per option, and a dismissal."""
    blocks: list[dict[str, Any]] = []
    for qi, question in enumerate(asked.questions):
        blocks.append(_section(f":question: *{question.header}* {question.question}"))
        buttons = [
            _button(option.label, f"{ANSWER}_{qi}_{oi}", _value(Pick(asked.session_id, asked.id, qi, oi)))
            for oi, option in enumerate(question.options[:24])
        ]  # fmt: skip
        if buttons:
            blocks.append({"type": "actions", "elements": buttons})
    dismiss = _button("Dismiss", DISMISS, _value(Pick(asked.session_id, asked.id)), "danger")
    blocks.append({"type": "actions", "elements": [dismiss]})
    return blocks


def answered_blocks(text: str, user: str, outcome: str) -> list[dict[str, Any]]:
    """A request's message once *user* answered it: no buttons left."""
    return [_section(text), {"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"<@{user}> {outcome}"}
    ]}]  # fmt: skip


def permission_outcome(reply: Literal["once", "always", "reject"]) -> str:
    return _DONE[reply]
