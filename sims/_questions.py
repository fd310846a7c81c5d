"""Questions in the simulation: the model asks them (``question``, and the plan switches
``plan_enter`` and ``plan_exit``, which ask the user first), clients answer, reject or
never answer them, and give up on them once faults stop.

Every choice comes from the caller's random stream, so a seed fixes which calls ask what
and how each is answered.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any, Final

from actors import SessionTools
from runtime import QuestionNotFoundError, llm
from runtime import events as ev

__all__ = ["ASKING_TOOLS", "answer_question", "answers_for", "give_up_questions", "question_call"]

ASKING_TOOLS: Final = ("question", "plan_enter", "plan_exit")
_RATE: Final = 0.12  # of the tool calls a turn makes, when it offers an asking tool
_TYPED: Final = 0.2  # of the answers to a question that takes typed text


def question_call(rng: random.Random, call_id: str, offered: set[str]) -> llm.ToolCall | None:
    """A call of one of the asking tools *offered* (about one call in eight), or None."""
    names = [name for name in ASKING_TOOLS if name in offered]
    if not names or rng.random() >= _RATE:
        return None
    name = rng.choice(names)
    if name != "question":
        return llm.ToolCall(call_id=call_id, name=name, input={})
    questions: list[dict[str, Any]] = []
    for index in range(rng.randint(1, 2)):
        labels = [f"option {letter}" for letter in "abc"[: rng.randint(2, 3)]]
        question: dict[str, Any] = {
            "question": f"Which one, {index}?", "header": f"Choice {index}",
            "options": [{"label": label, "description": f"Take {label}"} for label in labels],
        }  # fmt: skip
        if rng.random() < 0.3:
            question["multiple"] = True
        if rng.random() < 0.5:
            question["custom"] = False
        questions.append(question)
    return llm.ToolCall(call_id=call_id, name="question", input={"questions": questions})


def answers_for(asked: ev.QuestionAsked, rng: random.Random) -> list[list[str]]:
    """Answers that fit *asked*: one chosen label per question (several, or none, where
    it takes several), sometimes typed text where it takes that."""
    answers = []
    for info in asked.questions:
        labels = [option.label for option in info.options]
        if info.custom is not False and rng.random() < _TYPED:
            answers.append([f"typed {rng.randrange(100)}"])
        elif info.multiple is True:
            answers.append(sorted(rng.sample(labels, rng.randint(0, len(labels)))))
        else:
            answers.append([rng.choice(labels)])
    return answers


async def answer_question(
    tools: SessionTools, session_id: str, how: str, rng: random.Random
) -> str:
    """A client's answer to one of the session's pending questions: *how* is ``reply``
    (answers that fit), ``reject`` or ``never`` (it only looks). Returns what it saw.
    Raises what the tools API raises (the simulation records it as the answer)."""
    pending = await tools.pending_questions(session_id)
    if not pending or how == "never":
        return f"{len(pending)} questions"
    asked = pending[rng.randrange(len(pending))]
    if how == "reject":
        await tools.reject_question(session_id, asked.id)
    else:
        await tools.reply_question(session_id, asked.id, answers_for(asked, rng))
    return "ok"


async def give_up_questions(
    tools: SessionTools, session_id: str, log: Callable[[str], None]
) -> None:
    """Reject every pending question of the session (once faults stop: the user will not
    answer). Raises SessionNotFoundError for a deleted session."""
    for asked in await tools.pending_questions(session_id):
        log(f"gives up on question {asked.id}: reject")
        with contextlib.suppress(QuestionNotFoundError):  # answered meanwhile
            await tools.reject_question(session_id, asked.id)
