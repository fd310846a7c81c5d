"""Durable records and LLM schemas stay out of the cyclic garbage collector's reach.

They are plain trees of data (``gc=False``), so the collector never walks the histories
and caches built from them; only their list and dict fields are tracked.
"""

from __future__ import annotations

import gc

import msgspec

from runtime import events as ev
from runtime import llm
from runtime import messages as m
from runtime.llm import _events as llm_events
from runtime.llm import _schema as llm_schema


def _struct_classes(module: object) -> list[type[msgspec.Struct]]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct)
    ]


def test_every_record_and_llm_schema_is_untracked() -> None:
    modules = (ev, m, llm_schema, llm_events)
    classes = [c for module in modules for c in _struct_classes(module)]
    assert len(classes) > 60
    tracked = [c.__name__ for c in classes if c.__struct_config__.gc]
    assert tracked == []


def test_a_message_with_parts_is_untracked_but_its_list_is() -> None:
    parts = [llm.TextPart(text="hi")]
    message = llm.UserMessage(content=parts)
    assert not gc.is_tracked(message)
    assert gc.is_tracked(parts)
    added = ev.InputAdmitted(
        id="msg_1", session_id="ses_1", prompt=ev.Prompt(text="hi"), delivery="steer",
        admitted_seq=1, time_created=1,
    )  # fmt: skip
    assert not gc.is_tracked(added)
