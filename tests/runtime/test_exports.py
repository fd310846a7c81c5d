"""runtime's public modules: what other packages may import, pinned."""

from __future__ import annotations

from types import ModuleType

import msgspec
import pytest

import runtime
from runtime import (
    compaction,
    drain,
    events,
    history,
    inbox,
    messages,
    revert,
    telemetry,
    titles,
)

PUBLIC_MODULES = (compaction, drain, events, history, inbox, messages, revert, telemetry, titles)


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_all_is_sorted_and_is_exactly_the_public_names(module: ModuleType) -> None:
    assert module.__all__ == sorted(module.__all__)
    # dir(), not vars(): telemetry's recording side loads on first use (PEP 562).
    public = [n for n in dir(module) if not n.startswith("_") and n != "annotations"]
    assert module.__all__ == sorted(public)
    assert all(hasattr(module, n) for n in public)


def test_runtime_all_names_exist() -> None:
    for name in runtime.__all__:
        assert hasattr(runtime, name), name


def test_events_carries_the_durable_schema() -> None:
    assert {
        "Delivery",
        "DurableEvent",
        "InputAdmitted",
        "LiveDelta",
        "Prompt",
        "PromptAdmitted",
        "PromptPromoted",
        "SessionInfo",
        "SessionTime",
        "TokenCache",
        "TokenUsage",
        "decode_event",
        "wire_name",
    } <= set(events.__all__)
    for name in events.__all__:
        value = getattr(events, name)
        if isinstance(value, type) and issubclass(value, msgspec.Struct):
            assert value.__struct_config__.frozen, name


def test_events_decodes_what_it_encodes() -> None:
    event = events.InterruptRequested(timestamp=1, session_id="ses_1")
    assert events.decode_event(msgspec.json.encode(event)) == event


def test_runtime_names_are_the_same_objects_as_in_events_and_messages() -> None:
    for name in ("Delivery", "DurableEvent", "InputAdmitted", "Prompt", "SessionInfo"):
        assert getattr(runtime, name) is getattr(events, name)
    for name in ("AssistantMessage", "SessionMessage", "UserMessage"):
        assert getattr(runtime, name) is getattr(messages, name)
