"""The revert planner: hidden messages and which files get which content."""

from __future__ import annotations

import pytest

from runtime import events as ev
from runtime import messages as m
from runtime.history import HistoryDelta, HistoryView, ProjectionState, project
from runtime.revert import (
    HIDDEN_OPEN,
    MessageNotFoundError,
    close_hidden,
    file_changes,
    open_hidden,
    plan_revert,
    revert_paths,
    unrevert_files,
    visible_rows,
)

SID = "ses_1"
TIME = m.MessageTime(created=1)
MODEL = ev.ModelRef(id="m", provider_id="p")


def _user(mid: str) -> m.UserMessage:
    return m.UserMessage(id=mid, time=TIME, text=mid)


def _assistant(mid: str, *calls: str) -> m.AssistantMessage:
    content = [
        m.AssistantTool(
            id=c,
            name="write",
            time=m.ToolTime(created=1),
            state=m.ToolCompleted(input={}, content=[ev.ToolTextContent(text="ok")], structured={}),
        )  # fmt: skip
        for c in calls
    ]
    return m.AssistantMessage(id=mid, time=TIME, agent="build", model=MODEL, content=content)


def _image(mid: str, call: str, **files: bytes | None) -> ev.FileBeforeImage:
    images = [ev.FileImage(path=f"/w/{name}", content=content) for name, content in files.items()]
    return ev.FileBeforeImage(
        timestamp=1, session_id=SID, assistant_message_id=mid, call_id=call, files=images
    )


# u1 (0) a1 (1: c1 writes a from b"a0", seq 2) u2 (3) a2 (4: c2 edits a, seq 5; c3 creates b, seq 6)
ROWS = [
    (0, _user("u1")),
    (1, _assistant("a1", "c1")),
    (3, _user("u2")),
    (4, _assistant("a2", "c2", "c3")),
]
IMAGES = [
    (2, _image("a1", "c1", a=b"a0")),
    (5, _image("a2", "c2", a=b"a1")),
    (6, _image("a2", "c3", b=None)),
]
NOW = {
    "/w/a": ev.FileImage(path="/w/a", content=b"a2"),
    "/w/b": ev.FileImage(path="/w/b", content=b"b2"),
}


def _plan(
    message_id: str,
    part_id: str | None = None,
    previous: ev.SessionReverted | None = None,
    current=NOW,
):
    return plan_revert(
        ROWS, IMAGES, session_id=SID, message_id=message_id, part_id=part_id, previous=previous,
        current=current, timestamp=9,
    )  # fmt: skip


def test_revert_to_a_user_message_restores_each_file_to_its_first_before_image() -> None:
    plan = _plan("u2")
    assert plan.event.hidden_from == 3
    assert plan.hidden_ids == ["u2", "a2"]
    assert {(f.path, f.content) for f in plan.restore} == {("/w/a", b"a1"), ("/w/b", None)}
    # what unrevert writes back: the content before the revert
    assert {(f.path, f.content) for f in plan.event.files} == {("/w/a", b"a2"), ("/w/b", b"b2")}
    assert plan.event.revert == ev.RevertInfo(message_id="u2")


def test_revert_to_the_first_message_takes_the_earliest_image() -> None:
    plan = _plan("u1")
    assert plan.hidden_ids == ["u1", "a1", "u2", "a2"]
    assert {(f.path, f.content) for f in plan.restore} == {("/w/a", b"a0"), ("/w/b", None)}


def test_revert_to_a_part_keeps_the_message_and_the_calls_before_the_part() -> None:
    plan = _plan("a2", "c3")
    assert plan.event.hidden_from == 5
    assert plan.hidden_ids == []
    assert [(f.path, f.content) for f in plan.restore] == [("/w/b", None)]
    assert plan.event.revert == ev.RevertInfo(message_id="a2", part_id="c3")


def test_revert_paths_names_only_files_the_standing_revert_did_not_keep() -> None:
    assert revert_paths(ROWS, IMAGES, session_id=SID, message_id="u2") == ["/w/a", "/w/b"]
    first = _plan("u2").event
    assert revert_paths(ROWS, IMAGES, session_id=SID, message_id="u1", previous=first) == []


def test_moving_a_standing_revert_keeps_the_content_from_before_any_revert() -> None:
    first = _plan("u2")
    # files now hold the restored content; a second revert further back reads them again
    reverted_now = {f.path: f for f in first.restore}
    earlier = _plan("u1", previous=first.event, current=reverted_now)
    assert {(f.path, f.content) for f in earlier.event.files} == {("/w/a", b"a2"), ("/w/b", b"b2")}
    assert {(f.path, f.content) for f in earlier.restore} == {("/w/a", b"a0"), ("/w/b", None)}
    # redo: forward to a2's second call, file a gets its final content back, b its image
    forward = _plan("a2", "c3", previous=earlier.event, current={})
    assert {(f.path, f.content) for f in forward.restore} == {("/w/a", b"a2"), ("/w/b", None)}
    assert {(f.path, f.content) for f in unrevert_files(forward.event)} == {
        ("/w/a", b"a2"), ("/w/b", b"b2"),
    }  # fmt: skip


def test_an_omitted_image_leaves_its_file_alone() -> None:
    images = [(2, ev.FileBeforeImage(
        timestamp=1, session_id=SID, assistant_message_id="a1", call_id="c1",
        files=[ev.FileImage(path="/w/big", content=None, omitted=True)],
    ))]  # fmt: skip
    plan = plan_revert(
        ROWS, images, session_id=SID, message_id="u1", previous=None,
        current={"/w/big": ev.FileImage(path="/w/big", content=b"x")}, timestamp=9,
    )  # fmt: skip
    assert plan.restore == []
    assert plan.skipped == ["/w/big"]


def test_unknown_message_or_part_is_refused() -> None:
    with pytest.raises(MessageNotFoundError) as caught:
        _plan("msg_nope")
    assert caught.value.tag == "MessageNotFoundError"
    with pytest.raises(MessageNotFoundError, match="Part not found"):
        _plan("a2", "c9")
    with pytest.raises(MessageNotFoundError):
        _plan("u2", "c2")  # a user message has no parts to cut at


def test_hidden_ranges_open_close_and_filter() -> None:
    ranges = open_hidden([(1, 3)], 5)
    assert ranges == [(1, 3), (5, HIDDEN_OPEN)]
    assert open_hidden(ranges, 4) == [(1, 3), (4, HIDDEN_OPEN)]
    assert close_hidden(ranges, 8) == [(1, 3), (5, 8)]
    assert close_hidden(ranges, None) == [(1, 3)]
    info = ev.SessionInfo(
        id=SID, project_id="p", location=ev.Location(directory="/w"), title="t",
        time=ev.SessionTime(created=1, updated=1), hidden=open_hidden([(1, 3)], 4),
    )  # fmt: skip
    assert [mm.id for _, mm in visible_rows(ROWS, info)] == ["u1", "u2"]


def test_file_changes_describe_the_restore() -> None:
    changes = file_changes(NOW, _plan("u2").restore, root="/w")
    by_path = {c.path: c for c in changes}
    assert by_path["a"].status == "modified"
    assert (by_path["a"].additions, by_path["a"].deletions) == (1, 1)
    assert "-a2" in by_path["a"].patch and "+a1" in by_path["a"].patch
    assert by_path["b"].status == "deleted"
    assert file_changes(NOW, [NOW["/w/a"]]) == []


class _State:
    """Just enough of ProjectionState for session-info changes."""

    def __init__(self, info: ev.SessionInfo) -> None:
        self.info = info
        self.inputs: list[ev.InputAdmitted] = []

    def session(self, session_id: str) -> ev.SessionInfo:
        return self.info

    def put_session(self, info: ev.SessionInfo) -> None:
        self.info = info

    def put_input(self, row: ev.InputAdmitted) -> None:
        self.inputs.append(row)


def test_projection_sets_the_revert_and_a_prompt_drops_the_tail() -> None:
    info = ev.SessionInfo(
        id=SID, project_id="p", location=ev.Location(directory="/w"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip
    state = _State(info)
    store: ProjectionState = state  # type: ignore[assignment]
    reverted = _plan("u2").event
    project(reverted, 7, store)
    assert state.info.revert == ev.RevertInfo(message_id="u2")
    assert state.info.hidden == [(3, HIDDEN_OPEN)]
    project(ev.SessionUnreverted(timestamp=10, session_id=SID), 8, store)
    assert state.info.revert is ev.SessionInfo.__struct_defaults__[-2]  # UNSET
    assert state.info.hidden == ev.SessionInfo.__struct_defaults__[-1]
    project(reverted, 9, store)
    prompt = ev.PromptAdmitted(
        timestamp=11, session_id=SID, message_id="u3", prompt=ev.Prompt(text="again"),
        delivery="steer",
    )  # fmt: skip
    project(prompt, 12, store)
    assert state.info.hidden == [(3, 12)]
    assert len(state.inputs) == 1


def test_history_view_leaves_hidden_messages_out_of_rows_and_lowering() -> None:
    view = HistoryView()
    view.apply(HistoryDelta(0, 1, True, list(ROWS)))
    everything = view.lowered(MODEL, None)
    view.hide([(3, HIDDEN_OPEN)])
    assert [mm.id for _, mm in view.rows] == ["u1", "a1"]
    fewer = view.lowered(MODEL, None)
    assert len(fewer) < len(everything)
    view.hide([])
    assert view.lowered(MODEL, None) == everything
