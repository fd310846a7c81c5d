"""Ids: generated ones ascend; derived ones are the same for the same inputs."""

from __future__ import annotations

import random

from runtime import IdGenerator, derived_id, is_valid_id


def test_a_derived_id_is_fixed_by_its_inputs_and_sorts_with_its_millisecond() -> None:
    at = 1_790_000_000_000
    first = derived_id("msg", at, "que_1")
    assert first == derived_id("msg", at, "que_1")
    assert is_valid_id("msg", first, strict=True)
    assert len({first, derived_id("msg", at, "que_2"), derived_id("msg", at + 1, "que_1")}) == 3
    generated = IdGenerator(clock_ms=lambda: at, rng=random.Random(7))
    before = IdGenerator(clock_ms=lambda: at - 1).new("msg")
    after = IdGenerator(clock_ms=lambda: at + 1).new("msg")
    assert before < first < after
    assert first[:18] == generated.new("msg")[:18]  # the same time head
