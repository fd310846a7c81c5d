"""The web app as served: the page and its files under a strict Content-Security-Policy,
behind the gateway's password, installable, and opened by ``kittiwake web``."""

from __future__ import annotations

import base64
import os
import re
import stat
import subprocess
import sys
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import trio

import gateway.web
from gateway.web import CONTENT_SECURITY_POLICY
from runtime import Location
from tests.gateway.conftest import served
from tests.web.cdp import chromium

STATIC = Path(str(resources.files("gateway.web").joinpath("static")))
FILES = sorted(p.name for p in STATIC.iterdir())


def test_the_room_exports_its_names() -> None:
    assert gateway.web.__all__ == [
        "CONTENT_SECURITY_POLICY",
        "WebAssets",
        "open_in_browser",
        "web_routes",
    ]


async def test_the_page_and_its_files_come_with_the_policy(tmp_path: Path) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        page = await client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert page.headers["x-content-type-options"] == "nosniff"
        assert '<script type="module" src="web/app.js"></script>' in page.text
        kinds = {}
        for name in FILES:
            r = await client.get(f"/web/{name}")
            assert r.status_code == 200, name
            assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert r.content == (STATIC / name).read_bytes()
            kinds[name.rsplit(".", 1)[1]] = r.headers["content-type"]
        assert kinds["js"] == "text/javascript; charset=utf-8"
        assert kinds["webmanifest"] == "application/manifest+json"
        again = await client.get("/web/app.js", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 200  # another file's tag
        tag = (await client.get("/web/app.js")).headers["etag"]
        assert (await client.get("/web/app.js", headers={"If-None-Match": tag})).status_code == 304
        missing = await client.get("/web/nothing.js")
        assert missing.status_code == 404
        assert missing.json()["_tag"] == "NotFoundError"
        assert (await client.get("/web/..%2Fapp.js")).status_code == 404
        assert (await client.get("/inspector")).status_code == 200  # the inspector keeps its page


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "style" or "style" in names or any(n.startswith("on") for n in names):
            self.found.append(f"inline style or handler: <{tag} {attrs}>")
        if tag == "script" and "src" not in names:
            self.found.append("inline script")


VENDORED = {"marked.esm.js": "marked v18.2.1"}
"""Files taken unchanged from a pinned npm package (its licence beside it), by their banner."""


def test_the_files_hold_no_inline_script_style_or_html_sinks() -> None:
    for page in ("index.html", "share.html"):
        markup = _Markup()
        markup.feed((STATIC / page).read_text())
        assert markup.found == [], page
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"setTimeout\(\s*[\"'`]|createContextualFragment|DOMParser"
    )
    scripts = [name for name in FILES if name.endswith(".js")]
    assert {"app.js", "api.js", "dom.js", "live.js", "markdown.js", "model.js", "render.js",
            "session.js", *VENDORED} <= set(scripts)  # fmt: skip
    for name in scripts:
        text = (STATIC / name).read_text()
        assert not sinks.findall(text), name
        if name in VENDORED:  # its banner and its autolink rule name addresses; it loads none
            assert VENDORED[name] in text.splitlines()[1], name
            assert "MIT" in (STATIC / name.replace(".esm.js", ".LICENSE.txt")).read_text()
            assert not re.findall(r"\bimport\b|fetch\(|XMLHttpRequest|WebSocket", text), name
            continue
        assert "http://" not in text and "https://" not in text, name  # nothing from elsewhere
    assert "http" not in (STATIC / "index.html").read_text().replace('"http-equiv"', "")


async def test_the_page_files_and_stream_need_the_password(tmp_path: Path) -> None:
    async with served(tmp_path, password="pw") as g, httpx.AsyncClient(base_url=g.url) as client:
        for path in ("/", "/web/app.js", "/web/manifest.webmanifest", "/api/event"):
            r = await client.get(path)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"].startswith("Basic")
        good = {"Authorization": "Basic " + base64.b64encode(b"me:pw").decode()}
        assert (await client.get("/", headers=good)).status_code == 200
        assert (await client.get("/web/app.js", headers=good)).status_code == 200


async def test_chromium_shows_the_page_live_and_installable_behind_the_password(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, password="s3cret") as g, chromium(tmp_path / "profile") as browser:
        await g.rt.sessions.create(
            location=Location(directory=str(tmp_path)), title="first <b>session</b>"
        )
        outside = await browser.new_page()
        await outside.goto(g.url + "/")
        # refused: Chromium gets the 401 and has no password to answer it with
        assert await outside.evaluate("document.title") != "Kittiwake"
        assert await outside.evaluate("document.getElementById('sessions')") is None

        page = await browser.new_page()
        await page.goto(g.url.replace("http://", "http://me:s3cret@") + "/")
        assert await page.until("document.getElementById('conn').dataset.state === 'live'")
        titles = await page.until("document.querySelector('#sessions .title')?.textContent")
        assert titles == "first <b>session</b>"
        assert await page.evaluate("document.querySelectorAll('#sessions b').length") == 0
        installable = await page.send("Page.getInstallabilityErrors")
        assert installable["installabilityErrors"] == []
        manifest = await page.send("Page.getAppManifest")
        assert manifest["errors"] == [] and manifest["url"].endswith("/web/manifest.webmanifest")
        assert page.exceptions == [] and page.policy_violations() == []


def _browser_script(tmp_path: Path) -> tuple[Path, Path]:
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser.sh"
    script.write_text(f'#!/bin/sh\necho "$@" > {opened}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, opened


def _env(tmp_path: Path) -> dict[str, str]:
    script, _ = _browser_script(tmp_path)
    env = {**os.environ, "HOME": str(tmp_path), "KITTIWAKE_DATA_DIR": str(tmp_path / "data"),
           "BROWSER": str(script)}  # fmt: skip
    env.pop("KITTIWAKE_SERVER_PASSWORD", None)
    return env


async def _web(tmp_path: Path, *flags: str, then: Any = None) -> tuple[str, str]:
    """Run ``kittiwake web`` until it has said what it did, then *then(url)* if given; its
    URL and that line."""
    env = _env(tmp_path)
    command = [sys.executable, "-m", "gateway", "web", "--port", "0", *flags]
    server = await trio.lowlevel.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        out = b""
        with trio.fail_after(60):
            while b"web app is at" not in out and b"in the browser" not in out:
                chunk = await server.stdout.receive_some(4096)
                assert chunk, out.decode()
                out += chunk
        url = re.search(rb"serving (http://\S+)", out)
        assert url is not None, out.decode()
        async with httpx.AsyncClient() as client:
            page = await client.get(url[1].decode() + "/")
            assert page.status_code == 200 and "web/app.js" in page.text
        if then is not None:
            await then(url[1].decode())
        return url[1].decode(), out.decode().splitlines()[-1]
    finally:
        server.terminate()
        with trio.CancelScope(shield=True):
            await server.wait()


async def test_kittiwake_web_serves_and_opens_the_browser(tmp_path: Path) -> None:
    url, said = await _web(tmp_path)
    assert said == f"kittiwake: opened {url}/ in the browser"
    assert (tmp_path / "opened.txt").read_text().strip() == f"{url}/"


async def test_kittiwake_web_no_open_only_serves(tmp_path: Path) -> None:
    url, said = await _web(tmp_path, "--no-open")
    assert said == f"kittiwake: the web app is at {url}/"
    assert not (tmp_path / "opened.txt").exists()


async def test_kittiwake_web_beside_a_server_opens_its_page(tmp_path: Path) -> None:
    async def second(url: str) -> None:
        done = await trio.run_process(
            [sys.executable, "-m", "gateway", "web"], capture_stdout=True, capture_stderr=True,
            env=_env(tmp_path), cwd=tmp_path, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode() == f"kittiwake: opened {url}/ in the browser\n"
        assert (tmp_path / "opened.txt").read_text().strip() == f"{url}/"
        refused = await trio.run_process(
            [sys.executable, "-m", "gateway", "web", "--workers", "2"], capture_stdout=True,
            capture_stderr=True, env=_env(tmp_path), cwd=tmp_path, check=False,
        )  # fmt: skip
        assert refused.returncode == 2
        assert b"web serves in one process" in refused.stderr

    await _web(tmp_path, "--no-open", then=second)
