"""The inspector page, rendered by a real headless Chromium against a served runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import trio

from runtime import Prompt
from tests.gateway.conftest import served

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",
    "--window-size=1024,768",
]


async def _chromium(profile: Path, *args: str) -> bytes:
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]
    with trio.fail_after(60):
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True)
    return done.stdout


async def test_the_inspector_renders_the_actor_tree_in_chromium(tmp_path: Path) -> None:
    async with served(tmp_path) as g:
        created = await _create_session(g)
        await g.rt.sessions.prompt(created, prompt=Prompt(text="hello"))
        await g.rt.sessions.wait_idle(created)
        async with httpx.AsyncClient(base_url=g.url) as client:
            body = {"user": "inspected", "project": "*", "role": "read"}
            assert (await client.post("/api/token", json=body)).status_code == 201
        url = f"{g.url}/inspector"
        dom = (await _chromium(tmp_path / "p1", "--dump-dom", url)).decode()
        shot = tmp_path / "inspector.png"
        await _chromium(tmp_path / "p2", f"--screenshot={shot}", url)
        blank = tmp_path / "blank.png"
        await _chromium(tmp_path / "p3", f"--screenshot={blank}", "about:blank")
    print(dom[dom.find("<body>") :][:600])
    for actor in ("storage", "execution", created):
        assert actor in dom, actor
    assert '<div id="status" class="meta">pid ' in dom  # the page fetched /api/actors
    assert '<td>POST /api/token</td><td class="num">201</td>' in dom  # and the audit
    image, empty = shot.read_bytes(), blank.read_bytes()
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(image) > 2 * len(empty)  # the rendered tree, not an empty page


async def _create_session(g: object) -> str:
    from runtime import Location

    rt = g.rt  # type: ignore[attr-defined]
    info = await rt.sessions.create(location=Location(directory=str(rt.data_dir)))
    return info.id  # type: ignore[no-any-return]
