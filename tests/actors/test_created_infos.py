"""The infos of sessions created in this process, kept from the hub's committed events
until anything but a prompt's admission changes them (``actors.session._created``)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from actors.session._created import CreatedInfos
from runtime import Location, Prompt, SessionInfo
from runtime import events as ev
from storage import StoredEvent

NOW = 1_800_000_000_000


def _info(sid: str, **fields: Any) -> SessionInfo:
    return SessionInfo(
        id=sid, project_id="p", location=Location(directory="/tmp"), title="t",
        time=ev.SessionTime(created=NOW, updated=NOW), **fields,
    )  # fmt: skip


def _stored(event: ev.DurableEvent, seq: int) -> StoredEvent:
    data = msgspec.json.encode(event)
    kind = msgspec.json.decode(data, type=dict)["type"]
    return StoredEvent(
        id=f"evt_{seq}", aggregate_id=event.session_id, seq=seq, type=kind, version=1, data=data
    )


def _admitted(sid: str, seq: int) -> StoredEvent:
    event = ev.PromptAdmitted(
        timestamp=NOW, session_id=sid, message_id=f"msg_{seq}", prompt=Prompt(text="hi"),
        delivery="steer",
    )  # fmt: skip
    return _stored(event, seq)


def test_a_created_info_is_kept_through_admissions_and_forgotten_at_any_change() -> None:
    infos = CreatedInfos()
    info = _info("ses_a")
    infos.observe(_stored(ev.SessionCreated(timestamp=NOW, session_id="ses_a", info=info), 1))
    assert infos.get("ses_a") == info
    infos.observe(_admitted("ses_a", 2))
    infos.observe(_admitted("ses_b", 1))  # another session's: nothing kept of it
    assert infos.get("ses_a") == info and infos.get("ses_b") is None
    switched = ev.AgentSwitched(timestamp=NOW, session_id="ses_a", message_id="msg_s", agent="plan")
    infos.observe(_stored(switched, 3))
    assert infos.get("ses_a") is None


def test_an_admission_forgets_an_info_it_would_change() -> None:
    """A prompt admitted while messages are hidden closes their range (the projection's
    ``_admitted_after_revert``): such an info is not kept past it."""
    infos = CreatedInfos()
    info = _info("ses_a", hidden=[(3, 5)])
    infos.observe(_stored(ev.SessionCreated(timestamp=NOW, session_id="ses_a", info=info), 1))
    assert infos.get("ses_a") == info
    infos.observe(_admitted("ses_a", 2))
    assert infos.get("ses_a") is None


def test_the_kept_infos_are_bounded() -> None:
    infos = CreatedInfos(max_sessions=2)
    for n, sid in enumerate(["ses_a", "ses_b", "ses_c"]):
        created = ev.SessionCreated(timestamp=NOW, session_id=sid, info=_info(sid))
        infos.observe(_stored(created, n))
    assert (len(infos), infos.get("ses_a"), infos.get("ses_c")) == (2, None, _info("ses_c"))
    with pytest.raises(ValueError, match="max_sessions"):
        CreatedInfos(max_sessions=0)
