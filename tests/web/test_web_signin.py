"""The web app of a team server (``serve --tokens``) in Chromium: the sign-in form, a write
token's page listing and prompting (the answer streaming over the live stream), a read
token's page refused a prompt, a token of another project seeing nothing of this one, a
revocation sending the page back to the form, and a wrong token refused and audited."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from gateway import AccessLimits
from gateway.http._app import gateway_of
from runtime import Location, Prompt
from runtime.llm import StepFinish, StepStart, TextDelta, TextEnd, TextStart, Usage
from storage import ListRecords
from tests.gateway.conftest import answer, served
from tests.web.cdp import chromium
from tests.web.conftest import HOLD, HeldLLM

FORM = "!document.getElementById('signin').hidden"
LIVE = "document.getElementById('conn').dataset.state === 'live'"
TEXTS = "[...document.querySelectorAll('#messages .msg .text')].map(e => e.textContent)"


async def sign_in(page, token: str) -> None:
    await page.evaluate("document.getElementById('signin-token').value = ''")
    await page.type("#signin-token", token)
    await page.click("#signin button[type=submit]")


async def test_a_token_signs_the_page_in_with_its_role_and_project(tmp_path: Path) -> None:
    held = [
        StepStart(), TextStart(id="t1"), TextDelta(id="t1", delta="streamed "), HOLD,
        TextDelta(id="t1", delta="answer"), TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]  # fmt: skip
    llm = HeldLLM([answer("earlier"), held])
    limits = AccessLimits(recheck=0.1)
    async with (
        served(tmp_path, llm=llm, tokens=True, access_limits=limits) as g,
        httpx.AsyncClient(base_url=g.url, timeout=30) as client,
        chromium(tmp_path / "profile") as browser,
    ):
        access = gateway_of(g.server.app).access
        project = await g.rt.projects.id_of(str(tmp_path))
        info = await g.rt.sessions.create(location=Location(directory=str(tmp_path)))
        sid = str(info.id)
        await g.rt.sessions.prompt(sid, prompt=Prompt(text="first"))
        await g.rt.sessions.wait_idle(sid)
        write, write_record = await access.create_token(
            user="wanda", project=project, role="write", expires_in=None
        )
        read, _ = await access.create_token(user="rex", project="*", role="read", expires_in=None)
        other, _ = await access.create_token(
            user="olga", project="prj_other", role="write", expires_in=None
        )

        # Not signed in: the page shows the form, and a wrong token is refused and audited.
        page = await browser.new_page()
        await page.goto(g.url + "/")
        await page.until(FORM)
        assert await page.evaluate("document.getElementById('layout').hidden") is True
        await sign_in(page, write[:-4] + "AAAA")
        message = await page.until("document.getElementById('signin-error').textContent")
        assert message.startswith("UnauthorizedError")
        audit = [
            json.loads(a.data)
            for a in await g.rt.storage.read(ListRecords(kind="audit", limit=100))
        ]
        assert any(a["action"] == "POST /api/signin" and a["status"] == 401 for a in audit)

        # A write token: the session list loads, a prompt streams its answer.
        await sign_in(page, write)
        await page.until(LIVE)
        assert await page.evaluate("document.getElementById('signin').hidden") is True
        assert "wanda" in await page.evaluate("document.getElementById('who').textContent")
        await page.until(f"document.querySelector('#sessions [data-id=\"{sid}\"]') !== null")
        await page.evaluate(f"location.hash = '#/session/{sid}'")
        await page.until(f"document.body.dataset.session === '{sid}'")
        await page.type("#prompt-text", "second")
        await page.click("#send")
        await llm.holding.wait()
        await page.until(f"{TEXTS}.some(t => t.includes('streamed'))")
        llm.release.set()
        await page.until(f"{TEXTS}.some(t => t.includes('streamed answer'))")
        await g.rt.sessions.wait_idle(sid)

        # Reloaded, the page goes on with its cookie and names who signed in.
        await page.goto(g.url + "/")
        await page.until(LIVE)
        await page.until("!document.getElementById('signout').hidden")
        assert "wanda" in await page.evaluate("document.getElementById('who').textContent")

        # Revoked: the page's live stream is closed and it returns to the sign-in form.
        await access.revoke(write_record.id)
        await page.until(FORM)
        assert await page.evaluate("document.getElementById('layout').hidden") is True
        assert "ended" in await page.evaluate("document.getElementById('signin-error').textContent")
        r = await client.get("/api/session", headers={"Cookie": "kittiwake_signin=kws_" + "A" * 43})
        assert r.status_code == 401

        # A read token's page (another browser profile) lists but cannot prompt.
        reader = await browser.new_page(context=await browser.new_context())
        await reader.goto(g.url + "/")
        await reader.until(FORM)
        await sign_in(reader, read)
        await reader.until(LIVE)
        await reader.evaluate(f"location.hash = '#/session/{sid}'")
        await reader.until(f"document.body.dataset.session === '{sid}'")
        await reader.type("#prompt-text", "not allowed")
        await reader.click("#send")
        refusal = await reader.until("document.getElementById('prompt-error').textContent")
        assert refusal.startswith("ForbiddenError") and "read" in refusal
        r = await client.get(
            f"/api/session/{sid}/message", headers={"Authorization": f"Bearer {read}"}
        )
        assert r.status_code == 200 and "not allowed" not in r.text  # nothing was admitted

        # Signing out brings the form back; the cookie no longer works.
        await reader.click("#signout")
        await reader.until(FORM)

        # A token of another project sees none of this project's sessions.
        stranger = await browser.new_page(context=await browser.new_context())
        await stranger.goto(g.url + "/")
        await stranger.until(FORM)
        await sign_in(stranger, other)
        # Signed in, but the session list holds none of this project's sessions and every
        # route to one of them answers as if nothing were there.
        await stranger.until("document.getElementById('signin').hidden")
        r = await stranger.evaluate(
            "fetch('api/session').then(r => r.json()).then(b => b.data.length)"
        )
        assert r == 0
        await stranger.evaluate(f"location.hash = '#/session/{sid}'")
        shown = await stranger.until("document.getElementById('side-error').textContent")
        assert shown.startswith(("NotFoundError", "SessionNotFoundError")), shown
        assert (
            await stranger.evaluate("document.querySelectorAll('#sessions .session').length") == 0
        )

        for p in (page, reader, stranger):
            assert p.exceptions == [], p.exceptions
            assert p.policy_violations() == [], p.policy_violations()
