"""The chat-completions mock the bot's sessions answer from, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.conftest import Recorded, Reply
from tests.opencode.harness import Provider, last_user_text, respond, said


def answer(request: Recorded) -> Reply:
    """``tests.opencode.harness.respond``, and for ``stream``, three pieces 0.3 s apart."""
    body = request.json()
    if "You name conversations" in str(body["messages"][:1]):
        return respond(request)
    if body["messages"][-1].get("role") == "user" and "stream" in last_user_text(body).split():
        return said("One ", "two ", "three.", delay=0.3)
    return respond(request)


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    mock = Provider(answer).start()
    yield mock
    mock.stop()
