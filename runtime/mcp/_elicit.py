"""A server's ``elicitation/create`` as Kittiwake's questions, and the answers back as its
``ElicitResult`` (pure, on the protocol's JSON).

The first question carries the server's message with two choices, ``Accept`` and
``Decline`` (the explicit refusal); each field of the requested schema is a question of
its own: a boolean's choices are ``Yes``/``No``, an enum's its values (their titles when
the schema gives them), an array of enums takes several, and a string or a number is
typed. Dismissing the questions is ``cancel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from msgspec import UNSET

from runtime import events as ev

__all__ = ["ACCEPT", "DECLINE", "elicit_questions", "elicit_result"]

ACCEPT: Final = "Accept"
DECLINE: Final = "Decline"
_HEADER: Final = 30
_YES_NO: Final = {"Yes": True, "No": False}


def _choices(field: Mapping[str, Any]) -> dict[str, Any]:
    """The labels of a field's choices and the value each stands for (empty: typed)."""
    if field.get("type") == "boolean":
        return dict(_YES_NO)
    if field.get("type") == "array" and isinstance(field.get("items"), Mapping):
        return _choices(field["items"])
    for key in ("oneOf", "anyOf"):
        options = field.get(key)
        if isinstance(options, list) and options:
            return {
                str(o.get("title", o.get("const"))): o.get("const")
                for o in options
                if isinstance(o, Mapping) and "const" in o
            }
    values = field.get("enum")
    if isinstance(values, list):
        names = field.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(values) else values
        return {str(label): value for label, value in zip(labels, values, strict=True)}
    return {}


def _fields(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    return [(str(k), v) for k, v in properties.items() if isinstance(v, Mapping)]


def elicit_questions(server: str, params: Mapping[str, Any]) -> list[ev.QuestionInfo]:
    """The questions of an ``ElicitRequest``'s *params* (form or URL mode) from *server*."""
    message = str(params.get("message", ""))
    if params.get("mode") == "url":
        message = f"{message}\n{params.get('url', '')}"
    first = ev.QuestionInfo(
        question=message, header=f"{server} asks"[:_HEADER], custom=False,
        options=[
            ev.QuestionOption(label=ACCEPT, description=f"Answer {server}"),
            ev.QuestionOption(label=DECLINE, description=f"Tell {server} no"),
        ],
    )  # fmt: skip
    schema = params.get("requestedSchema")
    required = set(schema.get("required") or []) if isinstance(schema, Mapping) else set()
    questions = [first]
    for name, field in _fields(schema) if isinstance(schema, Mapping) else []:
        title = str(field.get("title") or name)
        text = str(field.get("description") or title)
        if name in required:
            text = f"{text} (required)"
        choices = _choices(field)
        options = [ev.QuestionOption(label=label, description="") for label in choices]
        questions.append(
            ev.QuestionInfo(
                question=text,
                header=title[:_HEADER],
                options=options,
                multiple=True if field.get("type") == "array" else UNSET,
                custom=False if choices else UNSET,
            )  # fmt: skip
        )
    return questions


def _value(field: Mapping[str, Any], answer: list[str]) -> Any:
    """The value of one answered field (``None``: left out)."""
    choices = _choices(field)
    if field.get("type") == "array":
        return [choices.get(a, a) for a in answer]
    if not answer or not answer[0].strip():
        return None
    text = answer[0].strip()
    if choices:
        return choices.get(text)
    try:
        if field.get("type") == "integer":
            return int(text)
        if field.get("type") == "number":
            return float(text)
    except ValueError:
        return None
    return text


def elicit_result(params: Mapping[str, Any], answers: list[list[str]] | None) -> dict[str, Any]:
    """The ``ElicitResult`` (JSON) of the answers to :func:`elicit_questions` (``None``:
    dismissed, so ``cancel``). Fields left unanswered, or typed as a number that is not
    one, are left out (the server checks what it requires)."""
    if answers is None:
        return {"action": "cancel"}
    if not answers or DECLINE in answers[0]:
        return {"action": "decline"}
    if params.get("mode") == "url":
        return {"action": "accept"}
    schema = params.get("requestedSchema")
    content: dict[str, Any] = {}
    fields = _fields(schema) if isinstance(schema, Mapping) else []
    for (name, field), answer in zip(fields, answers[1:], strict=False):
        value = _value(field, answer)
        if value is not None:
            content[name] = value
    return {"action": "accept", "content": content}
