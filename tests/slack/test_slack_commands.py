"""``/kw``: ``new`` and ``attach`` open a thread on a session, ``list`` lists sessions,
``model`` switches the latest thread's model and ``abort`` stops its running answer."""

from __future__ import annotations

import re
from pathlib import Path

from runtime import ModelRef, open_runtime
from tests.opencode.harness import Provider
from tests.slack.harness import MockSlack, Setup, bot, mock_slack
from tests.slack.test_slack_threads import final


def told(slack: MockSlack, n: int) -> str:
    """The *n*-th ephemeral message (0-based)."""
    return slack.of("chat.postEphemeral")[n]["text"]


async def model_of(data: Path, session_id: str) -> object:
    async with open_runtime(data_dir=data) as rt:
        return (await rt.sessions.get(session_id)).model


async def test_kw_new_list_attach_model_and_abort(tmp_path, provider: Provider) -> None:
    async with mock_slack() as slack:
        setup = Setup(tmp_path, provider, slack)
        (setup.project / "sub").mkdir()
        ephemeral = lambda: len(slack.of("chat.postEphemeral"))  # noqa: E731
        async with bot(setup, slack):
            await slack.command("new sub")
            await slack.until(lambda: ephemeral() == 1)
            [(root, announced)] = slack.posted()
            assert "thread_ts" not in announced and announced["channel"] == "C1"
            found = re.search(r"New session `(ses_\w+)`.* in `(.+)`", announced["text"])
            assert found is not None and found.group(2) == str(setup.project / "sub")
            session = found.group(1)
            assert [(t["session_id"], t["owner"]) for t in setup.threads.values()] == [
                (session, "U1")
            ]

            await slack.say("hello", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 2)
            [(reply, _)] = slack.posted()[1:]
            await slack.until(lambda: final(slack, reply) is not None)

            assert f"to talk to `{session}`" in told(slack, 0)
            await slack.command("list")
            await slack.until(lambda: ephemeral() == 2)
            assert session in told(slack, 1)

            await slack.command(f"attach {session}")
            await slack.until(lambda: ephemeral() == 3)
            [(attached, shown)] = slack.posted()[2:]
            assert shown["text"].startswith(f"Attached to session `{session}`")
            assert setup.threads[f"T1/C1/{attached}"]["session_id"] == session

            await slack.command("attach ses_nothere")
            await slack.until(lambda: ephemeral() == 4)
            assert "Session not found" in told(slack, 3)

            await slack.command("model local/m2")
            await slack.until(lambda: ephemeral() == 5)
            assert "now answers with `local/m2`" in told(slack, 4)

            await slack.say("slow", thread=attached, mention=False)
            await slack.until(lambda: len(slack.posted()) == 4)
            [(slow, _)] = slack.posted()[3:]
            await slack.until(lambda: any("Slowly" in t for t in slack.edits(slow)))
            await slack.command("abort")
            await slack.until(lambda: final(slack, slow) is not None)
            assert f"Aborted `{session}`" in told(slack, 5)
            assert (final(slack, slow) or "").count("and slowly") < 100

            await slack.command("")
            await slack.until(lambda: ephemeral() == 7)
            assert "/kw new [dir]" in told(slack, 6)
        assert await model_of(setup.data, session) == ModelRef(id="m2", provider_id="local")
