"""The event hub's observers: called with every item before its subscribers are offered it."""

from __future__ import annotations

import logging

import pytest

from actors import EventHub
from runtime import events as ev
from storage import StoredEvent


def _stored(seq: int) -> StoredEvent:
    return StoredEvent(id=f"evt_{seq}", aggregate_id="s1", seq=seq, type="x", version=1, data=b"{}")


def test_an_observer_sees_each_item_before_the_subscribers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = EventHub()
    seen: list[object] = []
    sub = hub.subscribe("s1")

    def observe(item: object) -> None:
        assert sub._send.statistics().current_buffer_used == len(seen)  # not offered yet
        seen.append(item)

    def fail(item: object) -> None:
        raise RuntimeError("observer fault")

    hub.add_observer(fail)
    hub.add_observer(observe)
    delta = ev.TextDelta(
        timestamp=1, session_id="s1", assistant_message_id="msg_1", text_id="t", delta="x"
    )
    with caplog.at_level(logging.ERROR, logger="kittiwake.hub"):
        hub.publish([_stored(1)])
        hub.publish_delta(delta)
    assert seen == [_stored(1), delta]
    assert [sub.receive_nowait(), sub.receive_nowait()] == [_stored(1), delta]
    assert "hub observer failed" in caplog.text  # and the subscriber still got both
    hub.remove_observer(observe)
    hub.remove_observer(observe)  # no-op
    hub.publish([_stored(2)])
    assert len(seen) == 2
