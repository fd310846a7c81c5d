"""A ``question`` tool's questions as one ACP elicitation form (``elicitation/create``,
form mode, tied to the session and the tool call), for a client that advertises
``elicitation.form``; and the form's answer as the question's answers (pure).

Each question is a field ``q0``, ``q1``, ...: a single choice is a string, one of the
choices (``oneOf``, titled by their labels); one that allows several is an array of them
(``items.anyOf``); a question without choices is a string typed in. Every field is
required.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from gateway.acp._wire import Outgoing
from runtime import events as ev

__all__ = ["Elicited", "FormParams", "form_answers", "question_form"]


class EnumOption(Outgoing, frozen=True):
    const: str
    title: str


class TitledItems(Outgoing, frozen=True):
    any_of: list[EnumOption]


class FormField(Outgoing, frozen=True):
    """One field: a string (one of ``one_of`` when set) or an array of strings (``items``)."""

    type: Literal["string", "array"]
    title: str | None = None
    description: str | None = None
    one_of: list[EnumOption] | None = None
    items: TitledItems | None = None
    min_items: int | None = None


class FormSchema(Outgoing, frozen=True):
    type: Literal["object"]
    properties: dict[str, FormField]
    required: list[str] | None = None


class FormParams(Outgoing, frozen=True):
    """``elicitation/create`` in form mode, tied to a session (and a tool call)."""

    session_id: str
    mode: Literal["form"]
    message: str
    requested_schema: FormSchema
    tool_call_id: str | None = None


class Elicited(msgspec.Struct, frozen=True):
    """The client's answer: ``accept`` (with ``content``), ``decline``, ``cancel``, or a
    later action (taken as a dismissal)."""

    action: str
    content: dict[str, Any] | None = None


def _field(info: ev.QuestionInfo) -> FormField:
    choices = [EnumOption(const=o.label, title=o.label) for o in info.options]
    details = "\n".join(f"{o.label}: {o.description}" for o in info.options if o.description)
    if not choices:
        return FormField(type="string", title=info.question)
    if info.multiple is True:
        return FormField(
            type="array", title=info.question, description=details or None,
            items=TitledItems(any_of=choices),
        )  # fmt: skip
    return FormField(
        type="string", title=info.question, description=details or None, one_of=choices
    )


def question_form(session_id: str, call_id: str, questions: list[ev.QuestionInfo]) -> FormParams:
    """The form that asks *questions* of the tool call *call_id*."""
    fields = {f"q{n}": _field(info) for n, info in enumerate(questions)}
    headers = [info.header or info.question for info in questions]
    return FormParams(
        session_id=session_id, tool_call_id=call_id, mode="form", message="\n".join(headers),
        requested_schema=FormSchema(type="object", properties=fields, required=list(fields)),
    )  # fmt: skip


def form_answers(questions: list[ev.QuestionInfo], answer: Elicited) -> list[list[str]] | None:
    """The labels answered to each of *questions* (a typed answer for one without
    choices), or ``None`` (a dismissal): the form declined or cancelled, a field missing,
    or a value that is not one of its question's choices."""
    if answer.action != "accept" or answer.content is None:
        return None
    answers: list[list[str]] = []
    for n, info in enumerate(questions):
        value = answer.content.get(f"q{n}")
        labels = {o.label for o in info.options}
        if info.multiple is True and info.options:
            if not isinstance(value, list) or not all(v in labels for v in value):
                return None
            answers.append([str(v) for v in value])
        elif isinstance(value, str) and (value in labels or not info.options):
            answers.append([value])
        else:
            return None
    return answers
