"""A chat-completions provider on 127.0.0.1 for each test, answering from its queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.opencode.harness import Provider


@pytest.fixture
def provider() -> Iterator[Provider]:
    mock = Provider()
    mock.server.responder = None  # answer from the queue (LocalServer.queue)
    mock.start()
    yield mock
    mock.stop()
