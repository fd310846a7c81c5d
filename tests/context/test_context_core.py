import msgspec
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import runtime.context as context
from runtime.context import (
    EMPTY_SNAPSHOT,
    UNAVAILABLE,
    DuplicateContextKeyError,
    EmptyBaselineError,
    EmptyRenderingError,
    InitializationBlocked,
    Initialized,
    InvalidContextKeyError,
    ReplacementBlocked,
    ReplacementReady,
    Snapshot,
    SnapshotDecodeError,
    SnapshotEntry,
    SystemContext,
    Unavailable,
    Unchanged,
    Updated,
    decode_snapshot,
    encode_snapshot,
)


class Cell:
    """A mutable value a loader reads at each observation."""

    def __init__(self, value: object) -> None:
        self.value = value

    async def load(self) -> object:
        await trio.lowlevel.checkpoint()
        return self.value


class Point(msgspec.Struct, frozen=True, kw_only=True):
    x: int
    y: int


def counter(key: str, cell: Cell, *, removable: bool = False) -> SystemContext:
    return SystemContext.make(
        key,
        int,
        cell.load,  # type: ignore[arg-type]
        lambda n: f"{key} is {n}",
        lambda n: f"{key} is now {n}",
        (lambda n: f"{key} no longer applies") if removable else None,
    )


async def initialized(ctx: SystemContext) -> Initialized:
    outcome = await ctx.initialize()
    assert isinstance(outcome, Initialized)
    return outcome


def test_exports_are_sorted_and_public() -> None:
    public = sorted(name for name in vars(context) if not name.startswith("_"))
    assert context.__all__ == sorted(context.__all__)
    assert set(context.__all__) <= set(public)


@pytest.mark.parametrize("key", ["core", "Core/date", "core/", "/date", "core/Date", "-a/b", ""])
def test_make_rejects_unstable_keys(key: str) -> None:
    with pytest.raises(InvalidContextKeyError):
        counter(key, Cell(1))


def test_combine_keeps_caller_order_and_rejects_duplicates() -> None:
    a, b, c = (counter(k, Cell(1)) for k in ("z/a", "a/b", "m/c"))
    assert SystemContext.combine(a, b, c).keys == ("z/a", "a/b", "m/c")
    assert SystemContext.combine(c, SystemContext.EMPTY, a).keys == ("m/c", "z/a")
    with pytest.raises(DuplicateContextKeyError, match="a/b"):
        SystemContext.combine(a, b, counter("a/b", Cell(2)))


async def test_initialize_renders_baseline_in_order_with_snapshot() -> None:
    ctx = SystemContext.combine(counter("t/b", Cell(2), removable=True), counter("t/a", Cell(1)))
    outcome = await initialized(ctx)
    assert outcome.baseline == "t/b is 2\n\nt/a is 1"
    assert encode_snapshot(outcome.snapshot) == (
        b'{"t/a":{"value":1},"t/b":{"removed":"t/b no longer applies","value":2}}'
    )


async def test_initialize_blocked_lists_unavailable_keys() -> None:
    ctx = SystemContext.combine(
        counter("t/a", Cell(UNAVAILABLE)),
        counter("t/b", Cell(1)),
        counter("t/c", Cell(UNAVAILABLE)),
    )
    assert await ctx.initialize() == InitializationBlocked(keys=["t/a", "t/c"])


async def test_empty_baseline_is_an_error() -> None:
    with pytest.raises(EmptyBaselineError):
        await SystemContext.EMPTY.initialize()
    with pytest.raises(EmptyBaselineError):
        await SystemContext.EMPTY.replace(EMPTY_SNAPSHOT)
    silent = SystemContext.make("t/a", int, Cell(1).load, lambda n: "", str)  # type: ignore[arg-type]
    with pytest.raises(EmptyRenderingError, match="t/a"):
        await silent.initialize()


async def test_reconcile_unchanged_when_values_are_equal() -> None:
    cell = Cell(Point(x=1, y=2))
    ctx = SystemContext.make("t/p", Point, cell.load, repr, repr)  # type: ignore[arg-type]
    first = await initialized(ctx)
    cell.value = Point(x=1, y=2)
    assert await ctx.reconcile(first.snapshot) == Unchanged()


async def test_two_changes_join_into_one_message() -> None:
    a, b, c = Cell(1), Cell(1), Cell(1)
    ctx = SystemContext.combine(counter("t/c", c), counter("t/a", a), counter("t/b", b))
    first = await initialized(ctx)
    a.value, c.value = 5, 7
    outcome = await ctx.reconcile(first.snapshot)
    assert isinstance(outcome, Updated)
    assert outcome.text == "t/c is now 7\n\nt/a is now 5"
    assert outcome.keys == ["t/c", "t/a"]
    assert await ctx.reconcile(outcome.snapshot) == Unchanged()


async def test_new_source_emits_its_baseline_once() -> None:
    first = await initialized(counter("t/a", Cell(1)))
    grown = SystemContext.combine(counter("t/a", Cell(1)), counter("t/new", Cell(9)))
    outcome = await grown.reconcile(first.snapshot)
    assert isinstance(outcome, Updated)
    assert (outcome.text, outcome.keys) == ("t/new is 9", ["t/new"])
    assert await grown.reconcile(outcome.snapshot) == Unchanged()


async def test_unavailable_keeps_admitted_value_and_emits_nothing() -> None:
    cell = Cell(1)
    ctx = counter("t/a", cell)
    first = await initialized(ctx)
    cell.value = UNAVAILABLE
    assert await ctx.reconcile(first.snapshot) == Unchanged()
    cell.value = 1
    assert await ctx.reconcile(first.snapshot) == Unchanged()
    cell.value = 3
    outcome = await ctx.reconcile(first.snapshot)
    assert isinstance(outcome, Updated) and outcome.text == "t/a is now 3"


async def test_unavailable_new_source_is_omitted_until_loaded() -> None:
    first = await initialized(counter("t/a", Cell(1)))
    late = Cell(UNAVAILABLE)
    ctx = SystemContext.combine(counter("t/a", Cell(1)), counter("t/late", late))
    assert await ctx.reconcile(first.snapshot) == Unchanged()
    late.value = 4
    outcome = await ctx.reconcile(first.snapshot)
    assert isinstance(outcome, Updated) and outcome.text == "t/late is 4"


async def test_departed_removable_sources_render_removals_in_key_order() -> None:
    cells = {k: Cell(1) for k in ("t/z", "t/b", "t/keep", "t/static")}
    full = SystemContext.combine(
        counter("t/z", cells["t/z"], removable=True),
        counter("t/b", cells["t/b"], removable=True),
        counter("t/keep", cells["t/keep"]),
        counter("t/static", cells["t/static"]),
    )
    first = await initialized(full)
    cells["t/keep"].value = 2
    outcome = await counter("t/keep", cells["t/keep"]).reconcile(first.snapshot)
    assert isinstance(outcome, Updated)
    assert outcome.text == "t/keep is now 2\n\nt/b no longer applies\n\nt/z no longer applies"
    assert sorted(outcome.snapshot) == ["t/keep", "t/static"]


async def test_departed_source_without_removal_is_silent() -> None:
    first = await initialized(
        SystemContext.combine(counter("t/a", Cell(1)), counter("t/b", Cell(1)))
    )
    assert await counter("t/a", Cell(1)).reconcile(first.snapshot) == Unchanged()


async def test_undecodable_stored_value_requires_replacement() -> None:
    cell = Cell(1)
    ctx = SystemContext.combine(counter("t/a", cell), counter("t/b", Cell(2)))
    stored = decode_snapshot(b'{"t/a":{"value":"one"},"t/b":{"value":2}}')
    outcome = await ctx.reconcile(stored)
    assert outcome == ReplacementReady(
        baseline="t/a is 1\n\nt/b is 2",
        snapshot=decode_snapshot(b'{"t/a":{"value":1},"t/b":{"value":2}}'),
    )
    cell_b = Cell(UNAVAILABLE)
    blocked = SystemContext.combine(counter("t/a", cell), counter("t/b", cell_b))
    assert await blocked.reconcile(stored) == ReplacementBlocked(keys=["t/b"])


async def test_replace_blocks_only_on_previously_admitted_unavailable_context() -> None:
    a, b = Cell(1), Cell(UNAVAILABLE)
    first = await initialized(counter("t/a", a))
    ctx = SystemContext.combine(counter("t/a", a), counter("t/b", b))
    outcome = await ctx.replace(first.snapshot)
    assert outcome == ReplacementReady(baseline="t/a is 1", snapshot=first.snapshot)
    a.value = UNAVAILABLE
    assert await ctx.replace(first.snapshot) == ReplacementBlocked(keys=["t/a"])


async def test_loaders_run_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    async def slow() -> int:
        await trio.sleep(1)
        return 1

    ctx = SystemContext.combine(
        *(SystemContext.make(f"t/{i}", int, slow, str, str) for i in range(5))
    )
    start = trio.current_time()
    await initialized(ctx)
    assert trio.current_time() - start == pytest.approx(1)


def test_unavailable_is_a_singleton() -> None:
    assert Unavailable() is UNAVAILABLE
    assert repr(UNAVAILABLE) == "UNAVAILABLE"


def test_decode_snapshot_rejects_garbage() -> None:
    for data in (b"[]", b"{", b'{"t/a":{"removed":"x"}}', b'{"t/a":{"value":1,"removed":3}}'):
        with pytest.raises(SnapshotDecodeError):
            decode_snapshot(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.dictionaries(
        st.from_regex(r"[a-z0-9][a-z0-9._-]{0,4}/[a-z0-9][a-z0-9._/-]{0,6}", fullmatch=True),
        st.tuples(_json, st.none() | st.text(max_size=10)),
        max_size=6,
    )
)
def test_snapshot_round_trip_is_byte_stable(raw: dict[str, tuple[object, str | None]]) -> None:
    entries = {
        key: SnapshotEntry(value=msgspec.Raw(msgspec.json.encode(v, order="sorted")), removed=r)
        for key, (v, r) in raw.items()
    }
    snapshot = Snapshot(entries)
    encoded = encode_snapshot(snapshot)
    decoded = decode_snapshot(encoded)
    assert decoded == snapshot
    assert encode_snapshot(decoded) == encoded
    assert decode_snapshot(encoded.decode()) == snapshot
    assert msgspec.json.decode(encoded) == {
        k: ({"value": v} if r is None else {"value": v, "removed": r}) for k, (v, r) in raw.items()
    }


async def test_cancellation_propagates_out_of_observation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def forever() -> int:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    ctx = SystemContext.combine(
        counter("t/a", Cell(1)), SystemContext.make("t/b", int, forever, str, str)
    )
    with trio.move_on_after(3) as scope:
        await ctx.reconcile(EMPTY_SNAPSHOT)
    assert scope.cancelled_caught


async def test_loaded_sources_need_no_loader() -> None:
    ctx = SystemContext.combine(
        SystemContext.loaded("t/a", int, 4, lambda n: f"a={n}", str),
        SystemContext.loaded("t/b", int, UNAVAILABLE, lambda n: f"b={n}", str),
    )
    observed = await ctx.observe()
    assert observed.unavailable == ["t/b"]
    assert observed.replace(EMPTY_SNAPSHOT) == ReplacementReady(
        baseline="a=4", snapshot=decode_snapshot(b'{"t/a":{"value":4}}')
    )


async def test_same_as_is_identity_of_sources_and_values() -> None:
    point = Point(x=1, y=2)
    cell = Cell(point)
    ctx = SystemContext.make("core/point", Point, cell.load, str, str)  # type: ignore[arg-type]
    first, again = await ctx.observe(), await ctx.observe()
    assert first.same_as(again)
    cell.value = Point(x=1, y=2)  # equal, but another object: not the same observation
    assert not first.same_as(await ctx.observe())
    other = SystemContext.make("core/point", Point, cell.load, str, str)  # type: ignore[arg-type]
    cell.value = point
    assert not first.same_as(await other.observe())  # another source object
    both = SystemContext.combine(ctx, counter("core/n", Cell(1)))
    assert not first.same_as(await both.observe())
