"""``kittiwake export`` and ``kittiwake import`` in real subprocesses: a session answered by
a local provider server, exported, imported into a new data dir and exported again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import msgspec
import trio

from actors import export_events
from gateway.http import session_export
from runtime import Location, open_runtime
from runtime import events as ev
from runtime.llm import ScriptedLLM
from storage import Append
from tests.gateway.test_cli_run import Cli, calls_read, provider, said, session_of

__all__ = ["provider"]  # the local provider server fixture


def events_of(export: dict) -> list[tuple]:
    return [(e["aggregateID"], e["seq"], e["type"], e["version"]) for e in export["events"]]


class RawEvent(msgspec.Struct):
    data: msgspec.Raw


class Export(msgspec.Struct):
    events: list[RawEvent]


def raw_data(text: bytes) -> list[bytes]:
    """Each event's ``data`` as the bytes the export holds (decoded with msgspec.Raw)."""
    return [bytes(e.data) for e in msgspec.json.decode(text, type=Export).events]


def stored_data(data_dir) -> list[tuple]:
    """The data dir's stored events straight from its DuckDB file."""
    with duckdb.connect(str(data_dir / "kittiwake.duckdb"), read_only=True) as conn:
        return conn.execute(
            "select aggregate_id, seq, data from event order by aggregate_id, seq"
        ).fetchall()


async def test_export_then_import_keeps_every_event(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    (cli.project / "notes.txt").write_text("kittiwake notes\n")
    provider.queue(calls_read("notes.txt"), said("the notes say hello"))
    done = await cli("run", "--model", "local/m1", "read the notes")
    assert done.returncode == 0, done.stderr.decode()
    sid = session_of(done.stderr)

    exported = await cli("export", sid, "--output", str(tmp_path / "s.json"))
    assert exported.returncode == 0, exported.stderr.decode()
    text = (tmp_path / "s.json").read_bytes()
    export = json.loads(text)
    assert export["format"] == "kittiwake.session" and export["sessionID"] == sid
    assert events_of(export)[0] == (sid, 0, "session.created", 1)
    kinds = [e["type"] for e in export["events"]]
    assert "session.next.tool.success" in kinds and "session.next.text.ended" in kinds

    (tmp_path / "other").mkdir()
    other = Cli(tmp_path / "other", provider)
    imported = await other("import", str(tmp_path / "s.json"))
    assert imported.returncode == 0, imported.stderr.decode()
    assert imported.stdout.decode().startswith(f"imported {sid}")

    again = await other("export", sid)
    assert again.returncode == 0, again.stderr.decode()
    assert events_of(json.loads(again.stdout)) == events_of(export)
    assert raw_data(again.stdout) == raw_data(text)
    source = [row for row in stored_data(cli.data) if row[0] == sid]
    assert stored_data(other.data) == source  # the stored JSON, byte for byte

    markdown = await other("export", sid, "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr.decode()
    page = markdown.stdout.decode()
    assert "## User\n\nread the notes" in page and "the notes say hello" in page
    assert "**Tool `read`** (completed)" in page and "kittiwake notes" in page
    assert "tokens in" in page

    provider.queue(said("still here"))  # the imported session goes on where it was
    more = await other("run", "--session", sid, "and now?")
    assert more.returncode == 0, more.stderr.decode()
    assert more.stdout.decode() == "still here\n"
    assert "the notes say hello" in str(provider.requests[-1].json()["messages"])


def made_export(tmp_path: Path) -> tuple[Path, str, Path]:
    """A data dir holding one session of three events, and that session's export, made
    in this process through the runtime's API; (data dir, session id, export file)."""
    data = tmp_path / "data"

    async def make() -> tuple[str, bytes]:
        async with open_runtime(data_dir=data, llm=ScriptedLLM([])) as rt:
            info = await rt.sessions.create(location=Location(directory=str(tmp_path)), title="t")
            notes = [
                ev.Synthetic(timestamp=5, session_id=info.id, message_id=f"msg_{n}", text="n")
                for n in (1, 2)
            ]
            await rt.storage.write(Append(session_id=info.id, events=notes))
            events = await export_events(rt, info.id)
        return info.id, msgspec.json.encode(session_export(info.id, [info], events))

    sid, body = trio.run(make)
    (tmp_path / "s.json").write_bytes(body)
    return data, sid, tmp_path / "s.json"


def test_import_refuses_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from gateway import cli as cli_module

    monkeypatch.chdir(tmp_path)
    data, sid, file = made_export(tmp_path)
    before = stored_data(data)

    def refused(path: Path, into: Path) -> str:
        status = cli_module.main(["import", str(path), "--data-dir", str(into)])
        err = capsys.readouterr().err
        assert status == 1, err
        assert "Traceback" not in err and err.count("\n") == 1
        return err

    assert f"Session {sid} already exists; nothing was imported" in refused(file, data)
    assert stored_data(data) == before

    export = json.loads(file.read_text())
    fresh = tmp_path / "fresh"
    gapped = {**export, "events": [e for e in export["events"] if e["seq"] != 1]}
    (tmp_path / "gap.json").write_text(json.dumps(gapped))
    err = refused(tmp_path / "gap.json", fresh)
    assert f"event 2 of {sid} does not follow its session's events" in err
    assert "nothing was imported" in err
    moved = {**export, "events": [{**e, "aggregateID": "ses_other"} for e in export["events"]]}
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    assert f"of {sid}, not the session.created" in refused(tmp_path / "moved.json", fresh)
    assert stored_data(fresh) == []
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    assert "not a Kittiwake session export" in refused(tmp_path / "bad.json", data)
    assert "cannot read" in refused(tmp_path / "none.json", data)
    assert cli_module.main(["export", "ses_unknown", "--data-dir", str(data)]) == 1
    assert "SessionNotFoundError" in capsys.readouterr().err
    assert stored_data(data) == before


def test_import_into_a_held_data_dir_says_to_stop_the_holder(tmp_path, monkeypatch, capsys):
    from gateway import cli as cli_module
    from storage import Journal

    data = tmp_path / "data"
    export = {
        "format": "kittiwake.session", "version": 1, "sessionID": "ses_x", "sessions": [],
        "events": [{"id": "evt_1", "aggregateID": "ses_x", "seq": 0, "type": "session.created",
                    "version": 1, "data": {}}],
    }  # fmt: skip
    (tmp_path / "s.json").write_text(json.dumps(export))
    held = Journal.open(data / "journal")  # as a serve holds it
    monkeypatch.chdir(tmp_path)
    try:
        status = cli_module.main(["import", str(tmp_path / "s.json"), "--data-dir", str(data)])
    finally:
        held.close()
    assert status == 1
    assert capsys.readouterr().err == (
        f"kittiwake: the data dir {data} is in use by process {os.getpid()}; "
        "stop it first, or import into another --data-dir\n"
    )
