"""Durable events of what waits on the user: permission requests and questions, with the
records clients list them as."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from runtime._record import Event, Record

__all__ = [
    "PermissionAsked",
    "PermissionInfo",
    "PermissionReplied",
    "QuestionAsked",
    "QuestionInfo",
    "QuestionOption",
    "QuestionRejected",
    "QuestionReplied",
    "QuestionTool",
]


class PermissionAsked(Event, frozen=True, tag="permission.v2.asked"):
    """A local tool call waits for a client to allow it (durable pending request), or a
    client asked for approval itself (``tool`` is then empty)."""

    request_id: str
    agent: str
    tool: str
    call_id: str
    permission: str
    resources: list[str]
    save: list[str] | UnsetType = UNSET
    """What an "always" reply approves for the project, when not the resources."""
    message_id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class PermissionReplied(Event, frozen=True, tag="permission.v2.replied"):
    request_id: str
    reply: Literal["once", "always", "reject"]


class PermissionInfo(Record, frozen=True):
    """A permission request as clients list it."""

    id: str
    session_id: str
    agent: str
    tool: str
    call_id: str
    permission: str
    resources: list[str]
    time_created: int
    status: Literal["pending", "once", "always", "reject"] = "pending"
    save: list[str] | UnsetType = UNSET
    message_id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class QuestionOption(Record, frozen=True):
    label: str
    description: str


class QuestionInfo(Record, frozen=True):
    """One structured question: choices, whether several may be picked (``multiple``),
    and whether a typed answer is accepted too (``custom``, on unless false)."""

    question: str
    header: str
    options: list[QuestionOption]
    multiple: bool | UnsetType = UNSET
    custom: bool | UnsetType = UNSET


class QuestionTool(Record, frozen=True):
    message_id: str
    call_id: str


class QuestionAsked(Event, frozen=True, tag="question.v2.asked"):
    """A pending question to the user (durable until replied or rejected)."""

    id: str
    questions: list[QuestionInfo]
    tool: QuestionTool | UnsetType = UNSET


class QuestionReplied(Event, frozen=True, tag="question.v2.replied"):
    """The user's answers, one list of chosen labels (or typed text) per question."""

    request_id: str
    answers: list[list[str]]


class QuestionRejected(Event, frozen=True, tag="question.v2.rejected"):
    request_id: str
