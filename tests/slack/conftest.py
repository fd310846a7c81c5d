"""The chat-completions mock the bot's sessions answer from, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.conftest import Recorded, Reply
from tests.opencode.harness import Provider, calls, last_user_text, respond, said

COLOR = {
    "question": "Which color?", "header": "Color",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
}  # fmt: skip


def answer(request: Recorded) -> Reply:
    """``tests.opencode.harness.respond``; for ``stream``, three pieces 0.3 s apart; for
    ``quiz``, the ``question`` tool asking ``COLOR``; for ``delegate``, a ``task`` for the
    ``reader`` subagent, who is to read notes.py."""
    body = request.json()
    if "You name conversations" in str(body["messages"][:1]):
        return respond(request)
    if body["messages"][-1].get("role") == "user" and "stream" in last_user_text(body).split():
        return said("One ", "two ", "three.", delay=0.3)
    if body["messages"][-1].get("role") == "user" and last_user_text(body) == "quiz":
        return calls("question", {"questions": [COLOR]})
    if body["messages"][-1].get("role") == "user" and last_user_text(body) == "delegate":
        return calls("task", {"description": "read notes", "prompt": "read notes.py",
                              "subagent_type": "reader"})  # fmt: skip
    return respond(request)


READER = (
    "---\ndescription: reads carefully\nmode: subagent\npermission:\n  read: ask\n---\n"
    "Be careful.\n"
)
"""A subagent whose reads ask first (``.kittiwake/agent/reader.md``)."""


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    mock = Provider(answer).start()
    yield mock
    mock.stop()
