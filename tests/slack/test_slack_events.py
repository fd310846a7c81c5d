"""Slack's HTTP Events API behind the gateway (``kittiwake serve --slack``): signed requests
to ``/slack/events`` reach the same bot as Socket Mode: a mention starts a session streamed
by edits, the thread continues it (across a restart of the server), buttons answer only
for the thread's owner, a retried delivery starts no second turn (also one admitted, or
mapped, before a crash the map did not see the rest of), and a request whose signature is
missing, wrong or stale is refused 401 with nothing run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from slack_sdk.signature import SignatureVerifier

from gateway.slack import Thread, ThreadMap, message_id, signature_refusal
from runtime import is_valid_id
from tests.opencode.harness import Provider, free_port
from tests.slack.harness import SECRET, TEAM, MockSlack, Setup, Signed, bot, mock_slack, said
from tests.slack.test_slack_asks import sessions_in
from tests.slack.test_slack_threads import asked_with, final, serve, stop, user_texts
from tests.waiting import serving_url


@asynccontextmanager
async def served(setup: Setup, slack: MockSlack, port: int) -> AsyncIterator[Signed]:
    """``kittiwake serve --slack`` on *port* over the setup's data dir, and Slack's signed
    requests to it; on exit stopped (SIGTERM) and waited for."""
    with setup.log() as err:
        server = await trio.lowlevel.open_process(
            [sys.executable, "-m", "gateway", "serve", "--slack", "--port", str(port)],
            cwd=setup.project, env=setup.env, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    try:
        url = await serving_url(server)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            yield Signed(client, slack)
    finally:
        if server.poll() is None:
            server.terminate()
            with trio.move_on_after(30):
                await server.wait()
            if server.poll() is None:
                server.kill()
        assert server.stdout is not None
        await server.stdout.aclose()


def http_setup(tmp_path: Any, provider: Provider, slack: MockSlack, **kw: Any) -> Setup:
    """A project whose ``kittiwake.json`` gives the signing secret as ``{env:...}``."""
    slack_config = {"signingSecret": "{env:KW_SLACK_SECRET}", **kw.pop("slack", {})}
    setup = Setup(tmp_path, provider, slack, slack=slack_config, **kw)
    setup.env.pop("SLACK_SIGNING_SECRET")
    setup.env.pop("SLACK_APP_TOKEN")  # not needed over HTTP
    setup.env["KW_SLACK_SECRET"] = SECRET
    return setup


async def test_signed_events_start_a_session_that_the_thread_continues_across_a_restart(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = http_setup(tmp_path, provider, slack)
        port = free_port()
        async with served(setup, slack, port) as signed:
            # Slack checks the Request URL: the challenge comes back.
            check = {"token": "t", "challenge": "c-123", "type": "url_verification"}
            answered = await signed.event(check)
            assert answered.status_code == 200 and answered.json() == {"challenge": "c-123"}

            # Unsigned, forged or stale: 401, nothing runs.
            mention = said("hello", slack.next_ts())
            unsigned = await signed.client.post("/slack/events", json=mention)
            forged = await signed.event(mention, secret="another-secret")
            stale = await signed.event(mention, at=time.time() - 600)
            for refused, says in ((unsigned, "not signed by Slack"),
                                  (forged, "does not match"), (stale, "five minutes")):  # fmt: skip
                assert refused.status_code == 401, refused.text
                assert refused.json()["_tag"] == "UnauthorizedError"
                assert says in refused.json()["message"]

            # A signed mention starts a session; Slack delivers it again (it thought the
            # first delivery timed out) while it is answered: one turn only.
            asked = len(provider.server.requests)
            started = time.monotonic()
            root, first = await signed.say("stream please")
            acked = time.monotonic() - started
            assert first.status_code == 200 and acked < 3  # Slack's limit for an answer
            _, again = await signed.say("stream please", ts=root, retry=1)
            assert again.status_code == 200
            await slack.until(lambda: len(slack.posted()) == 1)
            [(reply, posted)] = slack.posted()
            assert posted["thread_ts"] == root and posted["channel"] == "C1"
            await slack.until(lambda: final(slack, reply) is not None)
            shown = [text.split("\n")[0].strip() for text in slack.edits(reply)]
            assert shown[-1] == "One two three."
            assert {"One", "One two"} & set(shown)  # a part of it before the whole
            assert all(b.startswith(a) for a, b in zip(shown, shown[1:], strict=False))
            assert not any("hello" in user_texts(r.json())
                           for r in provider.server.requests[asked:])  # fmt: skip

            # The thread's next message continues the session; the retry above, queued
            # before it in the thread, was not taken.
            then, _ = await signed.say("and then?", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 2)
            [(second, _)] = slack.posted()[1:]
            await slack.until(lambda: final(slack, second) is not None)
            assert user_texts(asked_with(provider, "and then?"))[-2:] == [
                "stream please", "and then?",
            ]  # fmt: skip
            [thread] = setup.threads.values()
        # (The server is stopped: SIGTERM.) Started again, it continues the thread.
        async with served(setup, slack, port) as signed:
            # A delivery again of a message taken before the restart: not taken again.
            _, again = await signed.say("and then?", ts=then, thread=root, mention=False, retry=2)
            assert again.status_code == 200
            await signed.say("what was the word?", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 3)
            [(third, posted)] = slack.posted()[2:]
            assert posted["thread_ts"] == root
            await slack.until(lambda: final(slack, third) is not None)
        history = user_texts(asked_with(provider, "what was the word?"))
        assert history[-3:] == ["stream please", "and then?", "what was the word?"]
        assert [t["session_id"] for t in setup.threads.values()] == [thread["session_id"]]
        assert await sessions_in(setup.data) == [thread["session_id"]]


async def admit(client: httpx.AsyncClient, session: str, text: str, ts: str) -> dict[str, Any]:
    """Admit *text* into *session* under the message id the bot gives the Slack message *ts*
    of ``C1`` (the V2 prompt route), as a bot stopped before its map write leaves it; the
    receipt. Sent twice: the second is an exact retry, answered the stored receipt."""
    body = {"prompt": {"text": text}, "id": message_id(TEAM, "C1", ts)}
    path = f"/api/session/{session}/prompt"
    first, again = [await client.post(path, json=body) for _ in range(2)]
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    receipt = first.json()["data"]
    assert receipt["id"] == body["id"]
    assert {k: v for k, v in again.json()["data"].items() if k != "promotedSeq"} == {
        k: v for k, v in receipt.items() if k != "promotedSeq"
    }
    return dict(receipt)


def turns(provider: Provider, text: str) -> int:
    """How many provider requests answered a prompt whose last user text is *text*."""
    return sum(user_texts(r.json())[-1:] == [text] for r in provider.server.requests)


async def test_a_message_admitted_or_mapped_before_a_crash_runs_once_when_delivered_again(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = http_setup(tmp_path, provider, slack)
        port = free_port()
        async with served(setup, slack, port) as signed:
            root, _ = await signed.say("hello")
            await slack.until(lambda: len(slack.posted()) == 1)
            [(first, _)] = slack.posted()
            await slack.until(lambda: final(slack, first) is not None)
            [thread] = setup.threads.values()
            session = thread["session_id"]

            # Admitted under the message's id, the map not written: as a server killed
            # between the two leaves it. Slack's retry is an exact retry: no second turn;
            # the reply shows the turn the admission ran.
            ts = slack.next_ts()
            await admit(signed.client, session, "after the crash?", ts)
            waited = await signed.client.post(f"/api/session/{session}/wait")
            assert waited.status_code < 300, waited.text
            assert turns(provider, "after the crash?") == 1
            _, again = await signed.say(
                "after the crash?", ts=ts, thread=root, mention=False, retry=1
            )
            assert again.status_code == 200
            await slack.until(lambda: len(slack.posted()) == 2)
            [(second, posted)] = slack.posted()[1:]
            assert posted["thread_ts"] == root
            await slack.until(lambda: final(slack, second) is not None)
            assert (final(slack, second) or "").startswith("Hello from the mock.")
            assert turns(provider, "after the crash?") == 1
            assert ts in setup.threads[f"{TEAM}/C1/{root}"]["taken"]

            # Delivered once more, now taken: no reply; the message after it is answered.
            await signed.say("after the crash?", ts=ts, thread=root, mention=False, retry=2)
            await signed.say("and after that?", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 3)
            [(third, _)] = slack.posted()[2:]
            await slack.until(lambda: final(slack, third) is not None)
            assert user_texts(asked_with(provider, "and after that?")) == [
                "hello", "after the crash?", "and after that?",
            ]  # fmt: skip
            created = await signed.client.post("/api/session", json={})
            fresh = created.json()["data"]["id"]

        # A new thread mapped to its session, its first message not admitted: as a server
        # killed between the map write and the admission leaves it. Slack's retry runs it,
        # in that session.
        root2 = slack.next_ts()
        threads = await ThreadMap.open(setup.data / "slack" / "threads.json")
        await threads.put(Thread(team=TEAM, channel="C1", ts=root2, session_id=fresh, owner="U1"))
        async with served(setup, slack, port) as signed:
            await signed.say("stream it now", ts=root2, retry=1)
            await slack.until(lambda: len(slack.posted()) == 4)
            [(fourth, posted)] = slack.posted()[3:]
            assert posted["thread_ts"] == root2
            await slack.until(lambda: final(slack, fourth) is not None)
            assert (final(slack, fourth) or "").startswith("One two three.")
        assert turns(provider, "stream it now") == 1
        assert setup.threads[f"{TEAM}/C1/{root2}"]["session_id"] == fresh
        assert sorted(await sessions_in(setup.data)) == sorted([session, fresh])


async def test_attached_over_socket_mode_a_message_the_server_admitted_runs_once(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = Setup(tmp_path, provider, slack)
        server, url = await serve(setup, free_port())
        try:
            async with bot(setup, slack), httpx.AsyncClient(base_url=url, timeout=30) as client:
                root = await slack.say("hello")
                await slack.until(lambda: len(slack.posted()) == 1)
                [(first, _)] = slack.posted()
                await slack.until(lambda: final(slack, first) is not None)
                [thread] = setup.threads.values()
                session = thread["session_id"]

                # The server admitted the message under its id (the V2 route answers the
                # exact retry the stored receipt); the bot's map never took it. Socket Mode
                # delivers it: the bot's admission is an exact retry over HTTP too.
                ts = slack.next_ts()
                await admit(client, session, "attached again?", ts)
                message = said("attached again?", ts, thread=root, mention=False)
                await slack.push("events_api", message)
                await slack.until(lambda: len(slack.posted()) == 2)
                [(second, _)] = slack.posted()[1:]
                await slack.until(lambda: final(slack, second) is not None)
                assert (final(slack, second) or "").startswith("Hello from the mock.")

                # Delivered again (taken now): no reply; the next message is answered.
                await slack.push("events_api", message)
                await slack.say("attached after?", thread=root, mention=False)
                await slack.until(lambda: len(slack.posted()) == 3)
                [(third, _)] = slack.posted()[2:]
                await slack.until(lambda: final(slack, third) is not None)
        finally:
            if server.poll() is None:
                await stop(server)
        assert turns(provider, "attached again?") == 1
        assert user_texts(asked_with(provider, "attached after?")) == [
            "hello", "attached again?", "attached after?",
        ]  # fmt: skip


def test_a_slack_messages_id_is_one_the_runtime_takes_and_the_same_each_delivery() -> None:
    ids = {message_id("T01ABC", "C02DEF", "1700000000.000123") for _ in range(2)}
    assert ids == {"msg_slack-T01ABC-C02DEF-1700000000-000123"}
    assert message_id("T01ABC", "C02DEF", "1700000000.000124") not in ids
    odd = message_id("T 1", "C/1" * 40, "1.2")  # unsafe characters, too long: a digest
    assert is_valid_id("msg", odd) and len(odd) == len("msg_slack-") + 64
    assert all(is_valid_id("msg", i) for i in ids)


async def test_buttons_and_commands_over_http_answer_for_the_threads_owner_only(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = http_setup(tmp_path, provider, slack, permission={"edit": "ask"})
        setup.env["KITTIWAKE_SERVER_PASSWORD"] = "pw"  # Slack's signature is its credential
        notes = setup.project / "notes.py"
        notes.write_text("print(os.getcwd())\n")
        async with served(setup, slack, free_port()) as signed:
            root, _ = await signed.say("edit notes.py")
            await slack.until(lambda: any("blocks" in p for _, p in slack.posted()))
            [(reply, _), (ask, asked)] = slack.posted()
            assert asked["thread_ts"] == root and "edit" in asked["text"]
            buttons = {b["action_id"]: b for b in asked["blocks"][1]["elements"]}
            once = buttons["kw_permission_once"]["value"]

            # Someone else's click is acknowledged, and refused: the request stays pending.
            clicked = await signed.click("kw_permission_once", once, ask, root, user="U2")
            assert clicked.status_code == 200
            await slack.until(lambda: len(slack.of("chat.postEphemeral")) == 1)
            [told] = slack.of("chat.postEphemeral")
            assert told["user"] == "U2" and "Only <@U1>" in told["text"]
            assert slack.edits(ask) == [] and notes.read_text() == "print(os.getcwd())\n"

            # The owner's click is the reply: the edit runs, the answer ends.
            clicked = await signed.click("kw_permission_once", once, ask, root, user="U1")
            assert clicked.status_code == 200
            await slack.until(lambda: final(slack, reply) is not None)
            assert "✅ `edit` notes.py" in (final(slack, reply) or "")
            assert notes.read_text() == "print(sys.argv)\n"
            assert "allowed once" in slack.edits(ask)[-1]

            # The rest of the gateway still wants the password.
            assert (await signed.client.get("/api/session")).status_code == 401

            # A slash command over HTTP: acknowledged, answered ephemerally.
            [thread] = setup.threads.values()
            listed = await signed.command("list")
            assert listed.status_code == 200
            await slack.until(lambda: len(slack.of("chat.postEphemeral")) == 2)
            assert thread["session_id"] in slack.of("chat.postEphemeral")[1]["text"]


def test_the_signature_admits_slacks_requests_only() -> None:
    verifier = SignatureVerifier(SECRET)
    body = b'{"type":"event_callback"}'
    now = str(int(time.time()))
    signed = verifier.generate_signature(timestamp=now, body=body) or ""
    headers = {"x-slack-request-timestamp": now, "X-Slack-Signature": signed}
    assert signature_refusal(verifier, body, headers) is None
    assert "does not match" in (signature_refusal(verifier, body + b" ", headers) or "")
    old = str(int(time.time()) - 301)
    stale = {"X-Slack-Request-Timestamp": old,
             "X-Slack-Signature": verifier.generate_signature(timestamp=old, body=body) or ""}  # fmt: skip
    assert "five minutes" in (signature_refusal(verifier, body, stale) or "")
    assert "not signed" in (signature_refusal(verifier, body, {}) or "")
    odd = {**headers, "x-slack-request-timestamp": "soon"}
    assert "not a number" in (signature_refusal(verifier, body, odd) or "")


def test_serve_slack_without_the_signing_secret_or_slack_exits_2_saying_so(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env |= {"HOME": str(tmp_path), "KITTIWAKE_DATA_DIR": str(tmp_path / "data"),
            "SLACK_BOT_TOKEN": "xoxb-1"}  # fmt: skip
    command = [sys.executable, "-m", "gateway", "serve", "--slack", "--port", "0"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "no Slack signing secret: set SLACK_SIGNING_SECRET or slack.signingSecret" in (
        done.stderr
    )
    nowhere = f"http://127.0.0.1:{free_port()}/api/"  # nothing listens there
    env |= {"SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": nowhere}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert f"kittiwake: cannot reach Slack's Web API at {nowhere}" in done.stderr
