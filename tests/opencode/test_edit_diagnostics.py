"""An edit of a Python file on ``kittiwake serve`` started as ``make run`` starts it (the
virtualenv's ``bin/kittiwake``, with that ``bin`` not on ``PATH``): pylsp, installed beside it
by ``kittiwake[lsp]``, is found, and the error it reports is in the tool's result, in
``kittiwake run``'s output and in OpenCode's terminal UI, which also draws the edit's diff
and lists the file under "Modified Files" until ``/undo``."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import EventLog
from .harness import OPENCODE, VENV_BIN, Kittiwake, Provider, Tmux, client_env

SOURCE = "import os\n\nprint(os.getcwd())\n"
EDITED = "import os\n\nprint(sys.argv)\n"


@pytest.fixture(scope="module")
def served(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kittiwake]:
    started = Kittiwake(tmp_path_factory.mktemp("make-run"), provider, as_make_run=True).start()
    yield started
    started.stop()


def test_an_edit_gets_the_errors_of_the_virtualenvs_pylsp(served: Kittiwake):
    (served.project / "app.py").write_text(SOURCE)
    with httpx.Client(base_url=served.url, timeout=60) as client:
        assert client.get("/lsp").json() == []
        sid = client.post("/session", json={}).json()["id"]
        body = {"agent": "build", "parts": [{"type": "text", "text": "please edit app.py"}]}
        assert client.post(f"/session/{sid}/message", json=body).status_code == 200
        messages = client.get(f"/session/{sid}/message").json()
        servers = client.get("/lsp").json()
    [tool] = [p for m in messages for p in m["parts"] if p["type"] == "tool"]
    state = tool["state"]
    assert state["status"] == "completed", state
    assert "ERROR [3:7] undefined name 'sys' (pyflakes)" in state["output"]
    [error] = state["metadata"]["diagnostics"]["app.py"]
    assert error["message"] == "undefined name 'sys'" and error["severity"] == 1
    assert error["range"]["start"] == {"line": 2, "character": 6}
    assert (served.project / "app.py").read_text() == EDITED
    assert [(s["id"], s["status"]) for s in servers] == [("pylsp", "connected")]


def test_kittiwake_run_shows_the_diff_and_the_error(served: Kittiwake, tmp_path: Path):
    (served.project / "tool.py").write_text(SOURCE)
    done = subprocess.run(
        [str(VENV_BIN / "kittiwake"), "run", "--attach", served.url, "please", "edit", "tool.py"],
        cwd=served.project, env=served.env, input="", capture_output=True, text=True,
        timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Tool done."
    err = done.stderr.splitlines()
    start = err.index("✓ edit tool.py")
    assert err[start + 1 : start + 9] == [
        "  --- a/tool.py",
        "  +++ b/tool.py",
        "  @@ -1,3 +1,3 @@",
        "   import os",
        "   ",
        "  -print(os.getcwd())",
        "  +print(sys.argv)",
        "  error tool.py:3:7: undefined name 'sys' (pyflakes)",
    ]


def _until_file(path: Path, text: str, ui: Tmux, timeout: float = 20.0) -> None:
    """Wait until *path* holds *text*; raise with the screen."""
    deadline = time.monotonic() + timeout
    while path.read_text() != text:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never held {text!r}\n{ui.screen()}")
        time.sleep(0.05)


def test_the_terminal_ui_draws_the_edit_and_undo_clears_modified_files(
    served: Kittiwake, tmp_path: Path
):
    target = served.project / "view.py"
    target.write_text(SOURCE)
    events = EventLog(served.url, "/global/event")
    # wider than 120 columns: the UI shows its sidebar (and "Modified Files" in it)
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", served.url], client_env(tmp_path), width=160)
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 30, "the home screen")

        def command(text: str, shown: str | None = None) -> None:
            ui.type(text)
            ui.wait_for(lambda s: (shown or text) in s, 10, f"the typed {text}")
            ui.keys("Enter")

        command("please edit view.py")
        screen = ui.wait_for(
            lambda s: "Tool done." in s and "Modified Files" in s and "Error [3:7]" in s,
            30, "the edit's answer, its error and the modified file",
        )  # fmt: skip
        assert "← Edit view.py" in screen
        assert "- print(os.getcwd())" in screen and "+ print(sys.argv)" in screen
        assert "Error [3:7] undefined name 'sys'" in screen
        assert re.search(r"view\.py +\+1 -1", screen)
        _until_file(target, EDITED, ui)

        command("/undo", "/undo         Undo")
        _until_file(target, SOURCE, ui)
        ui.wait_for(lambda s: "Modified Files" not in s and "reverted" in s, 10, "no modified file")
        assert ui.alive()
    finally:
        ui.close()
        events.close()
    assert not events.invalid, events.invalid[:3]
    diffs = [p["properties"]["diff"] for p in events.payloads() if p["type"] == "session.diff"]
    assert [d["file"] for d in diffs[0]] == ["view.py"] and diffs[-1] == []
