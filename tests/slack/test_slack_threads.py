"""A Slack thread is a durable session: a mention starts it, the answer streams into one
message edited in place, the thread's next message continues it, a bot killed (SIGKILL)
and started again continues it still, and a bot beside a running server drives the server's sessions."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import trio

from tests.opencode.harness import Provider, free_port
from tests.slack.harness import TEAM, Setup, bot, mock_slack
from tests.waiting import serving_url


def user_texts(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]


def asked_with(provider: Provider, text: str) -> dict[str, Any]:
    """The last provider request whose last user message is *text*."""
    for request in reversed(provider.server.requests):
        body = request.json()
        if user_texts(body)[-1:] == [text]:
            return body
    raise AssertionError(f"no request ends with {text!r}")


def final(slack: Any, ts: str) -> str | None:
    """The message *ts*'s last text once it shows the run's tokens (its final form)."""
    edits = slack.edits(ts)
    return edits[-1] if edits and "_tokens:" in edits[-1] else None


async def test_a_mention_starts_a_session_streamed_by_edits_that_the_thread_continues(
    tmp_path, provider: Provider
) -> None:
    """... and goes on continuing after the bot is killed (SIGKILL) mid-answer and started
    again, which settles the answer it was writing from the session's history."""
    async with mock_slack() as slack:
        setup = Setup(tmp_path, provider, slack)
        async with bot(setup, slack) as process:
            root = await slack.say("stream please")
            await slack.until(lambda: len(slack.posted()) == 1)
            [(reply, posted)] = slack.posted()
            assert posted["thread_ts"] == root and posted["channel"] == "C1"
            await slack.until(lambda: final(slack, reply) is not None)
            edits = slack.edits(reply)
            # The answer grew in place, piece by piece, in order, then got its usage.
            shown = [text.split("\n")[0].strip() for text in edits]
            assert shown[-1] == "One two three."
            assert {"One", "One two"} & set(shown)  # a part of it before the whole (0.3 s apart)
            assert all(b.startswith(a) for a, b in zip(shown, shown[1:], strict=False))
            [thread] = setup.threads.values()
            assert thread["ts"] == root and thread["owner"] == "U1" and thread["team"] == TEAM

            await slack.say("and then?", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 2)
            ((second, posted),) = slack.posted()[1:]
            assert posted["thread_ts"] == root
            await slack.until(lambda: final(slack, second) is not None)
            assert "Hello from the mock." in (final(slack, second) or "")
            assert [t["session_id"] for t in setup.threads.values()] == [thread["session_id"]]

            await slack.say("slow", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 3)
            ((slow, _),) = slack.posted()[2:]
            await slack.until(lambda: any("Slowly" in t for t in slack.edits(slow)))
            process.kill()  # SIGKILL, mid-answer
            await process.wait()
        # One conversation: the provider saw the first prompt before the second.
        assert user_texts(asked_with(provider, "and then?"))[-2:] == ["stream please", "and then?"]

        async with bot(setup, slack):
            # The answer cut short is shown as the session's history has it: the run was
            # cut before its text part ended, so none of it was kept, and the reply says so.
            await slack.until(lambda: "the bot stopped" in (slack.edits(slow) or [""])[-1])
            assert "before any of it was kept" in slack.edits(slow)[-1]
            await slack.say("what was the word?", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 4)
            ((fourth, posted),) = slack.posted()[3:]
            assert posted["thread_ts"] == root
            await slack.until(lambda: final(slack, fourth) is not None)
        assert [t["session_id"] for t in setup.threads.values()] == [thread["session_id"]]
        # The cut answer was settled (the last one may be, or be settled at the next start).
        assert [t["reply"] for t in setup.threads.values()] in ([None], [fourth])
        history = user_texts(asked_with(provider, "what was the word?"))
        assert history[-4:] == ["stream please", "and then?", "slow", "what was the word?"]


async def serve(setup: Setup, port: int) -> tuple[trio.Process, str]:
    """``kittiwake serve`` on *port* over the setup's data dir, and its URL."""
    with setup.log() as err:
        server = await trio.lowlevel.open_process(
            [sys.executable, "-m", "gateway", "serve", "--port", str(port)], cwd=setup.project,
            env=setup.env, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    return server, await serving_url(server)


async def stop(server: trio.Process) -> None:
    """Stop *server* (SIGTERM) and wait for it."""
    server.terminate()
    await server.wait()
    assert server.stdout is not None
    await server.stdout.aclose()


async def test_a_bot_beside_a_running_server_drives_its_sessions_across_its_restart(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = Setup(tmp_path, provider, slack)
        port = free_port()
        server, url = await serve(setup, port)
        try:
            async with bot(setup, slack) as process:  # the server holds the data dir
                root = await slack.say("stream please")
                await slack.until(lambda: len(slack.posted()) == 1)
                [(reply, _)] = slack.posted()
                await slack.until(lambda: final(slack, reply) is not None)
                async with httpx.AsyncClient(base_url=url) as client:
                    listed = (await client.get("/api/session")).json()
                [thread] = setup.threads.values()
                assert [s["id"] for s in listed["data"]] == [thread["session_id"]]

                # The server is gone: the bot says so in the thread, and stays.
                await stop(server)
                await slack.say("are you there?", thread=root, mention=False)
                await slack.until(lambda: len(slack.posted()) == 2)
                [(lost, _)] = slack.posted()[1:]
                await slack.until(lambda: any(":warning:" in t for t in slack.edits(lost)))
                assert process.poll() is None

                server, _ = await serve(setup, port)  # the server again, at its address
                await slack.say("and then?", thread=root, mention=False)
                await slack.until(lambda: len(slack.posted()) == 3)
                [(second, _)] = slack.posted()[2:]
                await slack.until(lambda: final(slack, second) is not None)
        finally:
            if server.poll() is None:
                await stop(server)
        assert [t["session_id"] for t in setup.threads.values()] == [thread["session_id"]]
        assert "attaching to the kittiwake serve" in (setup.data / "slack-bot.log").read_text()
        assert user_texts(asked_with(provider, "and then?"))[-2:] == ["stream please", "and then?"]
