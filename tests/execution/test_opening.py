"""A prompt to an idle, ready session opens its activity in the admission's own batch,
whether the caller names the message (OpenCode's clients always do) or the runtime does:
one commit fewer than an admission followed by a wake. A real runtime on a real DuckDB
file, counting the store's committed batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import IdGenerator, PromptConflictError, llm
from storage import Statistics
from tests.execution.conftest import answer, prompt, running, user_texts


async def test_a_named_prompt_opens_an_idle_session_in_its_admission(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer(str(n)) for n in range(5)])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)

        async def batches(**named: str) -> int:
            before = (await rt.storage.read(Statistics())).batches
            await rt.sessions.prompt(sid, prompt=prompt("again"), **named)
            await rt.sessions.wait_idle(sid)
            return int((await rt.storage.read(Statistics())).batches - before)

        unnamed = await batches()
        named = await batches(id=IdGenerator().new("msg"))
        assert named == unnamed, (named, unnamed)
        # Without a wake the same prompt is admitted alone and promoted by a later drain.
        await rt.sessions.prompt(sid, prompt=prompt("later"), resume=False)
        later = await batches()
        assert later == unnamed


async def test_an_exact_retry_and_a_conflict_on_the_opening_path(tmp_path: Path) -> None:
    """Naming the message keeps its guarantees on the opening path: an exact retry answers
    the stored receipt and admits nothing twice, a conflicting reuse admits nothing, and
    the session's next prompt is answered either way."""
    client = llm.ScriptedLLM([answer(str(n)) for n in range(5)])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)
        mid = IdGenerator().new("msg")
        first = await rt.sessions.prompt(sid, prompt=prompt("named"), id=mid)
        await rt.sessions.wait_idle(sid)
        again = await rt.sessions.prompt(sid, prompt=prompt("named"), id=mid)
        assert (again.id, again.admitted_seq) == (first.id, first.admitted_seq)
        await rt.sessions.wait_idle(sid)
        with pytest.raises(PromptConflictError):
            await rt.sessions.prompt(sid, prompt=prompt("other text"), id=mid)
        await rt.sessions.prompt(sid, prompt=prompt("after"))
        await rt.sessions.wait_idle(sid)
        texts = [user_texts(request)[-1] for request in client.requests]
        assert texts == ["warm", "named", "after"]
