"""The state of an ACP session in one connection, and how its modes and configuration
options look to the client (pure: what the agent sends is built here from that state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import trio

from gateway.acp._backend import ModelChoice, Offer
from gateway.acp._updates import Updates
from gateway.acp._wire import ConfigOption, ConfigValue, ModeState, SessionMode, SessionResult
from runtime import ModelRef, SessionInfo

__all__ = [
    "BUILD",
    "Following",
    "Session",
    "config_options",
    "context_of",
    "follow_info",
    "session_setup",
]

BUILD: Final = "build"


@dataclass(slots=True)
class Following:
    """A run this connection follows: its prompt's, or one watched since its session was
    loaded (``watched``: a prompt of this connection's stops watching it)."""

    updates: Updates
    cancelled: bool = False
    watching: bool = False
    """Whether its subagent children's permission requests are watched."""
    watched: trio.CancelScope | None = None


@dataclass(slots=True)
class Session:
    """An ACP session this connection set up (new, loaded, resumed or forked)."""

    id: str
    directory: str
    agent: str
    model: ModelRef
    offer: Offer
    prompt: Following | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)
    cursor: int | None = None
    """The last seq of the session this connection saw (``None``: not known)."""


def follow_info(session: Session, info: SessionInfo) -> None:
    """Take the session's agent and model from its info (its agent's, else the
    default model, when it selected none)."""
    names = [a.name for a in session.offer.agents]
    if isinstance(info.agent, str):
        session.agent = info.agent
    elif BUILD not in names and names:
        session.agent = names[0]
    if isinstance(info.model, ModelRef):
        session.model = info.model
        return
    chosen = next((a for a in session.offer.agents if a.name == session.agent), None)
    agent_model = ModelRef.parse(chosen.model) if chosen is not None else None
    session.model = agent_model or session.offer.model


def session_setup(session: Session, *, with_id: bool = False) -> SessionResult:
    """What setting *session* up answers: its id (new and fork), modes and options."""
    modes = ModeState(
        current_mode_id=session.agent,
        available_modes=[
            SessionMode(id=a.name, name=a.name, description=a.description)
            for a in session.offer.agents
        ],
    )  # fmt: skip
    return SessionResult(
        session_id=session.id if with_id else None, modes=modes,
        config_options=config_options(session),
    )  # fmt: skip


def config_options(session: Session) -> list[ConfigOption]:
    """The session's options: its mode (agent) and its model, with their choices."""
    agents = [
        ConfigValue(value=a.name, name=a.name, description=a.description)
        for a in session.offer.agents
    ]
    models = [_model_value(choice) for choice in session.offer.models]
    current = _model_name(session.model)
    if current not in {m.value for m in models}:
        models.insert(0, ConfigValue(value=current, name=current))
    return [
        ConfigOption(
            id="mode", name="Mode", category="mode", current_value=session.agent,
            options=agents,
        ),
        ConfigOption(
            id="model", name="Model", category="model", current_value=current,
            options=models,
        ),
    ]  # fmt: skip


def _model_name(model: ModelRef) -> str:
    return f"{model.provider_id}/{model.id}"


def _model_value(choice: ModelChoice) -> ConfigValue:
    return ConfigValue(value=_model_name(choice.ref), name=choice.name)


def context_of(session: Session) -> int | None:
    """The context window of the session's model, when its provider's catalog says."""
    for choice in session.offer.models:
        if (
            choice.ref.provider_id == session.model.provider_id
            and choice.ref.id == session.model.id
        ):
            return choice.context
    return None
