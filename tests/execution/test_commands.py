"""Commands: templates expanded ($ARGUMENTS, $1, !`shell`, @file) and admitted, embedded."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import InvalidInputError, Location, llm, open_runtime
from runtime.agents import command_hints, expand_arguments, file_mentions
from tests.execution.conftest import answer, user_texts

REVIEW = """---
description: Review one file
agent: plan
---
Review @$1 for $2.
All arguments: $ARGUMENTS
Status: !`echo clean; echo to-stderr >&2`
"""


def test_arguments_fill_placeholders_and_the_last_takes_the_rest() -> None:
    assert expand_arguments("Do $1 then $2", "a b c") == "Do a then b c"
    assert expand_arguments("Fix $1 ($2): $ARGUMENTS", '"two words" x') == (
        'Fix two words (x): "two words" x'
    )
    assert expand_arguments("Only $3", "a") == "Only "
    assert expand_arguments("No placeholder", "extra text") == "No placeholder\n\nextra text"
    assert command_hints("$2 $1 $ARGUMENTS $1") == ["$1", "$2", "$ARGUMENTS"]
    assert file_mentions("see @a.py, @docs/b.md and mail@example.com @a.py") == [
        "a.py",
        "docs/b.md",
    ]


async def test_a_command_expands_and_runs_with_its_agent(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".kittiwake" / "command").mkdir(parents=True)
    (work / ".kittiwake" / "command" / "review.md").write_text(REVIEW)
    (work / "notes.txt").write_text("kittiwake notes\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    client = llm.ScriptedLLM([answer("reviewed"), answer("again")])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        listed = {c.name: c for c in await rt.tools.commands.list(str(work))}
        assert set(listed) == {"init", "review"}
        assert listed["review"].description == "Review one file"
        assert listed["review"].agent == "plan"

        receipt = await rt.tools.commands.run(sid, "review", "notes.txt correctness")
        await rt.sessions.wait_idle(sid)
        [text] = user_texts(client.requests[0])
        assert receipt.prompt.text == text
        assert text.startswith("Review @notes.txt for correctness.\n")
        assert "All arguments: notes.txt correctness\n" in text
        assert "Status: clean\nto-stderr" in text
        assert '<file path="notes.txt">\nkittiwake notes\n\n</file>' in text
        assert (await rt.sessions.get(sid)).agent == "plan"
        assert "write" not in {t.name for t in client.requests[0].tools}

        await rt.tools.commands.run(sid, "review", "../secret.txt style")
        await rt.sessions.wait_idle(sid)
        text = user_texts(client.requests[1])[-1]
        assert "Review @../secret.txt for style." in text and "outside" not in text

        with pytest.raises(InvalidInputError, match="Unknown command 'nope'.*init, review"):
            await rt.tools.commands.run(sid, "nope")
        assert len(client.requests) == 2
