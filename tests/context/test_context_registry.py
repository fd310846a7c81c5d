from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.context import (
    DuplicateContextKeyError,
    Initialized,
    InvalidContextKeyError,
    SystemContext,
    SystemContextRegistry,
    Unchanged,
    Updated,
)


def fixed(key: str, value: str, *, removable: bool = False) -> SystemContext:
    async def load() -> str:
        return value

    return SystemContext.make(
        key,
        str,
        load,
        lambda v: f"[{key}] {v}",
        lambda v: f"[{key}] now {v}",
        (lambda v: f"[{key}] gone") if removable else None,
    )


def delayed(
    delay: float, contexts: list[SystemContext]
) -> Callable[[], Awaitable[list[SystemContext]]]:
    async def produce() -> list[SystemContext]:
        await trio.sleep(delay)
        return contexts

    return produce


_contribution_keys = st.lists(
    st.from_regex(r"[a-z]{1,3}/[a-z]{1,4}", fullmatch=True), min_size=1, max_size=8, unique=True
)


@settings(max_examples=60, deadline=None)
@given(_contribution_keys, st.data())
def test_rendering_is_deterministic_under_any_completion_order(
    keys: list[str], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(keys), label="registration order")
    delays = data.draw(
        st.lists(st.floats(0, 5), min_size=len(keys), max_size=len(keys)), label="delays"
    )

    async def main() -> str:
        registry = SystemContextRegistry()
        for key, delay in zip(order, delays, strict=True):
            sources = [fixed(f"{key}/one", key), fixed(f"{key}/two", key.upper())]
            registry.contribute(key, delayed(delay, sources))
        outcome = await (await registry.load()).initialize()
        assert isinstance(outcome, Initialized)
        return outcome.baseline

    baseline = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    expected = "\n\n".join(
        f"[{key}/one] {key}\n\n[{key}/two] {key.upper()}" for key in sorted(keys)
    )
    assert baseline == expected


async def test_builtins_contribution_sorts_before_instructions() -> None:
    registry = SystemContextRegistry()
    registry.contribute("core/instructions", fixed("core/instructions", "i"))
    registry.contribute("core/builtins", [fixed("core/environment", "e"), fixed("core/date", "d")])
    assert registry.keys == ["core/builtins", "core/instructions"]
    assert (await registry.load()).keys == ("core/environment", "core/date", "core/instructions")


async def test_producers_run_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    registry = SystemContextRegistry()
    for i in range(4):
        registry.contribute(f"t/{i}", delayed(2, [fixed(f"t/{i}", "x")]))
    start = trio.current_time()
    await registry.load()
    assert trio.current_time() - start == pytest.approx(2)


async def test_closing_a_contribution_removes_its_sources_at_next_load() -> None:
    registry = SystemContextRegistry()
    registry.contribute("core/builtins", fixed("core/date", "d"))
    handle = registry.contribute("plug/x", [fixed("plug/a", "a", removable=True)])
    first = await (await registry.load()).initialize()
    assert isinstance(first, Initialized)
    assert first.baseline == "[core/date] d\n\n[plug/a] a"
    handle.close()
    handle.close()
    assert handle.closed and registry.keys == ["core/builtins"]
    outcome = await (await registry.load()).reconcile(first.snapshot)
    assert isinstance(outcome, Updated) and outcome.text == "[plug/a] gone"
    assert await (await registry.load()).reconcile(outcome.snapshot) == Unchanged()


async def test_key_can_be_reused_after_close_without_old_handle_interfering() -> None:
    registry = SystemContextRegistry()
    with registry.contribute("plug/x", fixed("plug/a", "1")) as old:
        with pytest.raises(DuplicateContextKeyError):
            registry.contribute("plug/x", fixed("plug/a", "2"))
    new = registry.contribute("plug/x", fixed("plug/a", "2"))
    old.close()
    assert not new.closed and registry.keys == ["plug/x"]
    assert registry.statistics().contributions == 1


async def test_duplicate_source_keys_across_contributions_fail() -> None:
    registry = SystemContextRegistry()
    registry.contribute("a/x", fixed("t/same", "1"))
    registry.contribute("b/x", fixed("t/same", "2"))
    with pytest.raises(DuplicateContextKeyError, match="t/same"):
        await registry.load()


def test_contribution_keys_are_validated() -> None:
    with pytest.raises(InvalidContextKeyError):
        SystemContextRegistry().contribute("builtins", SystemContext.EMPTY)


async def test_statistics_count_loads() -> None:
    registry = SystemContextRegistry()
    registry.contribute("a/x", SystemContext.EMPTY)
    await registry.load()
    await registry.load()
    assert registry.statistics().loads == 2
