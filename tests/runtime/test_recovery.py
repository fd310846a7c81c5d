"""Crash recovery closes every tool call left without a result, in open and closed steps."""

from __future__ import annotations

from runtime import Location, ModelRef, Prompt, SessionInfo
from runtime import events as ev
from runtime.history import cut_short, needs_recovery, recovery_events
from sims._invariants import fold

SID = "ses_recovery"
NOW = 1_800_000_000_000


def _history(*, failed_step: bool) -> list[tuple[int, object]]:
    info = SessionInfo(
        id=SID, project_id="p", location=Location(directory="/tmp"), title="t",
        time=ev.SessionTime(created=NOW, updated=NOW),
    )  # fmt: skip
    common = dict(timestamp=NOW, session_id=SID)
    events: list[ev.DurableEvent] = [
        ev.SessionCreated(**common, info=info),
        ev.PromptAdmitted(**common, message_id="msg_u", prompt=Prompt(text="go"), delivery="steer"),
        ev.PromptPromoted(**common, message_id="msg_u", prompt=Prompt(text="go"), time_created=NOW),
        ev.StepStarted(
            **common,
            assistant_message_id="msg_a",
            agent="build",
            model=ModelRef(id="m", provider_id="p"),
        ),  # fmt: skip
        ev.ToolCalled(
            **common,
            assistant_message_id="msg_a",
            call_id="call_1",
            tool="work",
            input={"seconds": 1},
        ),  # fmt: skip
    ]
    if failed_step:
        # The turn failed writing the call's result and closed its step as far as it could.
        error = ev.SessionError(message="Internal error: StorageError: journal append failed")
        events.append(ev.StepFailed(**common, assistant_message_id="msg_a", error=error))
    stored = fold(_stored(events))
    return sorted(stored.messages.values(), key=lambda entry: entry[0])


def _stored(events: list[ev.DurableEvent]) -> list[object]:
    import msgspec

    from storage import StoredEvent

    return [
        StoredEvent(
            id=f"evt_{i}",
            aggregate_id=SID,
            seq=i,
            type=e.__struct_config__.tag,  # type: ignore[arg-type]
            version=1,
            data=msgspec.json.encode(e),
        )  # fmt: skip
        for i, e in enumerate(events)
    ]


def test_a_call_without_a_result_in_a_failed_step_is_closed() -> None:
    events = recovery_events(SID, _history(failed_step=True), needs_resume=False, now=NOW,
                             tool_error="Tool execution interrupted")  # fmt: skip
    assert [type(e) for e in events] == [ev.ToolFailed]
    assert events[0].call_id == "call_1"  # type: ignore[union-attr]
    assert events[0].error.message == "Tool execution interrupted"  # type: ignore[union-attr]


def test_an_open_step_is_closed_with_its_call_and_marked_for_resume() -> None:
    events = recovery_events(SID, _history(failed_step=False), needs_resume=False, now=NOW,
                             tool_error="Tool execution interrupted")  # fmt: skip
    assert [type(e) for e in events] == [ev.ToolFailed, ev.StepEnded, ev.ResumeNeeded]


def test_a_failed_step_with_a_call_without_a_result_needs_recovery_but_no_resume() -> None:
    """A crash right after such a turn failed, before its own recovery was durable: the
    start-up recovery must still find the session (seed 1111584 of the long run)."""
    _, latest = _history(failed_step=True)[-1]
    assert not cut_short(latest)  # the run failed: nothing to resume
    assert needs_recovery(latest)
    _, open_step = _history(failed_step=False)[-1]
    assert cut_short(open_step) and needs_recovery(open_step)
    _, prompt = _history(failed_step=True)[0]
    assert needs_recovery(prompt) == cut_short(prompt)
