"""The workload of one seed: what clients do to which session, and when.

A workload is plain data (a list of :class:`Action`), so a failing one can be shrunk by
dropping actions and sessions and replayed with the same seed for everything else.
"""

from __future__ import annotations

import random
from typing import Final, Literal

import msgspec

__all__ = ["ALL_FEATURES", "DEFAULT_SESSIONS", "Action", "Features", "Workload", "generate"]

DEFAULT_SESSIONS: Final = 50
HORIZON: Final = 40.0  # simulated seconds over which the actions are spread

Kind = Literal[
    "prompt", "retry", "conflict", "interrupt", "resume", "agent", "model", "reply",
    "delete", "context", "clock", "compact", "answer",
]  # fmt: skip

# Relative frequencies of what a client does next.
_MIX: Final[dict[str, int]] = {
    "prompt": 10, "retry": 2, "conflict": 1, "interrupt": 2, "resume": 2, "agent": 1,
    "model": 1, "reply": 4, "delete": 1, "context": 1,
}  # fmt: skip


class Features(msgspec.Struct, frozen=True, kw_only=True):
    """What a seed exercises beyond the first simulator. Each feature draws from its own
    random streams after everything older, so a seed found before a feature existed
    replays the same run with the feature off (``--without``)."""

    compaction: bool = True
    """Compaction pressure (a small context window in half the seeds) and manual
    compactions."""
    questions: bool = True
    """The model asks questions (``question``, ``plan_enter``, ``plan_exit``); clients
    answer, reject or never answer them."""
    tasks: bool = True
    """The model starts subagent tasks (``task``): child sessions the runtime creates,
    prompts and waits for; clients answer their permission requests too."""

    @classmethod
    def without(cls, spec: str | None) -> Features:
        """``compaction,questions`` -> every feature but those. Raises ValueError for a
        name that is not a feature."""
        names = [part.strip() for part in (spec or "").split(",") if part.strip()]
        unknown = [name for name in names if name not in ALL_FEATURES]
        if unknown:
            raise ValueError(f"unknown features {unknown}; known: {', '.join(ALL_FEATURES)}")
        return cls(**dict.fromkeys(names, False))

    def off(self) -> list[str]:
        """The features turned off, by name."""
        return [name for name in ALL_FEATURES if not getattr(self, name)]


ALL_FEATURES: Final[tuple[str, ...]] = Features.__struct_fields__


class Action(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One client action at simulated time *at* on session *session*.

    ``arg`` is the action's choice: the delivery of a prompt (``steer``/``queue``) and
    whether it carries its own id (``steer:id``), the reply to a permission request
    (``once``/``always``/``reject``/``never``) or to a question (``reply``/``reject``/
    ``never``), the agent or model to switch to, or the kind of clock change
    (``jump``/``rollover``).
    """

    at: float
    session: int
    kind: str
    arg: str = ""


class Workload(msgspec.Struct, frozen=True, kw_only=True):
    sessions: int
    actions: list[Action]


def generate(rng: random.Random, sessions: int, *, per_session: tuple[int, int] = (3, 9),
             clock_faults: tuple[bool, bool] = (False, False),
             features: Features = Features()) -> Workload:  # fmt: skip
    """*sessions* sessions, each with a random number of actions in *per_session* at
    random times; manual compactions and answers to questions (with those *features*);
    clock jumps and date rollovers when the fault plan enables them."""
    kinds = list(_MIX)
    weights = list(_MIX.values())
    actions: list[Action] = []
    for index in range(sessions):
        times = sorted(round(rng.uniform(0, HORIZON), 3) for _ in range(rng.randint(*per_session)))
        for position, at in enumerate(times):
            kind = "prompt" if position == 0 else rng.choices(kinds, weights)[0]
            if kind == "delete" and position < len(times) - 2:
                kind = "prompt"  # deletions late, so most sessions live a while
            actions.append(Action(at=at, session=index, kind=kind, arg=_arg(kind, rng)))
    jump, rollover = clock_faults
    for kind, on in (("jump", jump), ("rollover", rollover)):
        if on:
            for _ in range(rng.randint(1, 2)):
                at = round(rng.uniform(0, HORIZON), 3)
                actions.append(Action(at=at, session=-1, kind="clock", arg=kind))
    # Each feature's actions are drawn after the older ones', so adding it left them as
    # they were.
    if features.compaction:
        for index in range(sessions):
            if rng.random() < 0.3:
                at = round(rng.uniform(0, HORIZON), 3)
                actions.append(Action(at=at, session=index, kind="compact"))
    if features.questions:
        for index in range(sessions):
            for _ in range(rng.choice([0, 1, 1, 2])):
                at = round(rng.uniform(0, HORIZON), 3)
                arg = rng.choice(["reply", "reply", "reject", "never"])
                actions.append(Action(at=at, session=index, kind="answer", arg=arg))
    actions.sort(key=lambda a: (a.at, a.session))
    return Workload(sessions=sessions, actions=actions)


def _arg(kind: str, rng: random.Random) -> str:
    if kind == "prompt":
        delivery = rng.choice(["steer", "queue"])
        return f"{delivery}:id" if rng.random() < 0.3 else delivery
    if kind == "reply":
        return rng.choice(["once", "always", "reject", "never"])
    if kind == "agent":
        return rng.choice(["build", "plan"])
    if kind == "model":
        return rng.choice(["sim/small", "sim/large"])
    return ""
