"""Permission requests and questions come as buttons that only the thread's owner may press
(the click is the durable reply), and a user the configuration does not admit is refused:
nothing runs."""

from __future__ import annotations

import json
from pathlib import Path

from runtime import open_runtime
from tests.opencode.harness import Provider
from tests.slack.conftest import READER
from tests.slack.harness import Setup, bot, mock_slack
from tests.slack.test_slack_threads import final


async def sessions_in(data: Path) -> list[str]:
    """The data dir's sessions but subagents' (opened afresh)."""
    async with open_runtime(data_dir=data) as rt:
        page = await rt.sessions.list(limit=100)
        return [info.id for info in page.data if not isinstance(info.parent_id, str)]


async def test_permission_requests_and_questions_are_answered_by_the_owners_click_only(
    tmp_path, provider: Provider
) -> None:
    async with mock_slack() as slack:
        setup = Setup(
            tmp_path, provider, slack, permission={"edit": "ask"},
            slack={"allowedUsers": ["U1", "U2"]},
        )  # fmt: skip
        (setup.project / ".kittiwake" / "agent").mkdir(parents=True)
        (setup.project / ".kittiwake" / "agent" / "reader.md").write_text(READER)
        notes = setup.project / "notes.py"
        notes.write_text("print(os.getcwd())\n")
        async with bot(setup, slack):
            root = await slack.say("edit notes.py")
            await slack.until(lambda: any("blocks" in p for _, p in slack.posted()))
            [(reply, _), (ask, asked)] = slack.posted()
            assert asked["thread_ts"] == root and "edit" in asked["text"]
            buttons = {b["action_id"]: b for b in asked["blocks"][1]["elements"]}
            assert set(buttons) == {
                "kw_permission_once",
                "kw_permission_always",
                "kw_permission_reject",
            }
            once = buttons["kw_permission_once"]["value"]

            # Another (admitted) user's click is refused: the request stays pending.
            await slack.click("kw_permission_once", once, ask, root, user="U2")
            await slack.until(
                lambda: any(p["user"] == "U2" for p in slack.of("chat.postEphemeral"))
            )
            [told] = slack.of("chat.postEphemeral")
            assert "Only <@U1>" in told["text"]
            assert slack.edits(ask) == [] and notes.read_text() == "print(os.getcwd())\n"

            # A user the configuration does not admit: refused, nothing created. Their
            # talk in a thread that is not the bot's is none of its business: no refusal.
            await slack.say("just chatting", user="U3", thread="1690000000.000001", mention=False)
            await slack.say("hello", user="U3")
            await slack.until(
                lambda: any(p["user"] == "U3" for p in slack.of("chat.postEphemeral"))
            )
            refused = [p for p in slack.of("chat.postEphemeral") if p["user"] == "U3"]
            assert "Sorry" in refused[0]["text"]
            assert len(slack.posted()) == 2 and len(setup.threads) == 1

            # The owner's click is the reply: the edit runs, the answer ends.
            await slack.click("kw_permission_once", once, ask, root, user="U1")
            await slack.until(lambda: final(slack, reply) is not None)
            assert "Tool done." in (final(slack, reply) or "")
            assert "✅ `edit` notes.py" in (final(slack, reply) or "")
            assert notes.read_text() == "print(sys.argv)\n"
            [settled] = slack.edits(ask)
            assert "allowed once" in settled
            [shown] = [p for p in slack.of("chat.update") if p["ts"] == ask]
            assert json.dumps(shown["blocks"]).count('"button"') == 0

            # A question: a button per option; the owner's pick is the answer.
            await slack.say("quiz", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 4)
            [(answer, _), (quiz, quizzed)] = slack.posted()[2:]
            assert "Which color?" in quizzed["text"]
            blue = quizzed["blocks"][1]["elements"][1]
            assert blue["text"]["text"] == "Blue"
            await slack.click(blue["action_id"], blue["value"], quiz, root, user="U2")
            await slack.until(lambda: len(slack.of("chat.postEphemeral")) == 3)
            assert "Only <@U1>" in slack.of("chat.postEphemeral")[2]["text"]
            await slack.click(blue["action_id"], blue["value"], quiz, root, user="U1")
            await slack.until(lambda: final(slack, answer) is not None)
            assert "Tool done." in (final(slack, answer) or "")
            assert "answered Blue" in slack.edits(quiz)[-1]
            results = [r.json()["messages"][-1] for r in provider.server.requests]
            assert any(m["role"] == "tool" and "Blue" in str(m["content"]) for m in results)

            # A subagent's request is put in the thread too, and answered the same way.
            await slack.say("delegate", thread=root, mention=False)
            await slack.until(lambda: len(slack.posted()) == 6)
            [(delegated, _), (child, childs)] = slack.posted()[4:]
            assert childs["text"] == ":lock: *read* (reader) `notes.py`"
            value = childs["blocks"][1]["elements"][0]["value"]
            await slack.click("kw_permission_once", value, child, root, user="U1")
            await slack.until(lambda: final(slack, delegated) is not None)
            assert "✅ `task` read notes" in (final(slack, delegated) or "")
            assert "allowed once" in slack.edits(child)[-1]
        [thread] = setup.threads.values()
        assert await sessions_in(setup.data) == [thread["session_id"]]
        assert len([p for p in slack.of("chat.postEphemeral") if p["user"] == "U3"]) == 1
