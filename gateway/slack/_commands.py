"""``/kw``: ``new [dir]``, ``list``, ``attach <session>``, ``abort`` and ``model <name>``
(``Commands``). ``new`` and ``attach`` post a message whose thread is the session's;
``abort`` and ``model`` act on the session of the thread the user wrote to last in the
channel. Answers are ephemeral (seen by the user alone); ``new`` and ``attach`` answer once
the thread is mapped."""

from __future__ import annotations

import os
import time
from typing import Final

from gateway.acp import Backend
from gateway.slack._link import Commanded
from gateway.slack._settings import SlackSettings
from gateway.slack._threads import Thread, ThreadMap
from gateway.slack._web import SlackWeb
from runtime import InvalidInputError, ModelRef, SessionInfo

__all__ = ["Commands", "HELP", "LIST_LIMIT"]

LIST_LIMIT: Final = 20
"""The most sessions ``/kw list`` shows."""
HELP: Final = (
    "`/kw new [dir]` a new session (in its own thread) · `/kw list` the latest sessions · "
    "`/kw attach <session>` continue a session in a new thread · `/kw abort` stop the "
    "running answer of your latest thread here · `/kw model <provider/model>` switch its model"
)


def _directory(named: str, base: str) -> str:
    """The directory ``/kw new`` names: *base* when none; relative to *base*; ``~`` expanded."""
    return os.path.join(base, os.path.expanduser(named)) if named else base


class Commands:
    """``/kw``'s subcommands over *backend*; a refusal raises the runtime's error
    (``SessionNotFoundError``, ``InvalidInputError``), which the bot tells the user."""

    def __init__(
        self, backend: Backend, web: SlackWeb, threads: ThreadMap, settings: SlackSettings
    ) -> None:
        self._backend = backend
        self._web = web
        self._threads = threads
        self._settings = settings

    async def run(self, command: Commanded) -> None:
        name, _, rest = command.text.partition(" ")
        rest = rest.strip()
        if name == "new":
            info = await self._backend.create(_directory(rest, self._settings.directory))
            await self._post(command, info, "New session")
        elif name == "attach" and rest:
            info = await self._backend.get(rest)
            await self._post(command, info, "Attached to session")
        elif name == "list":
            await self._tell(command, await self._list(command))
        elif name == "abort":
            thread = await self._latest(command)
            if thread is not None:
                await self._backend.interrupt(thread.session_id)
                await self._tell(command, f"Aborted `{thread.session_id}`.")
        elif name == "model" and rest:
            thread = await self._latest(command)
            if thread is not None:
                provider, _, model = rest.partition("/")
                if not provider or not model:
                    raise InvalidInputError(f"{rest}: a model is named provider/model")
                await self._backend.switch_model(
                    thread.session_id, ModelRef(id=model, provider_id=provider)
                )
                await self._tell(command, f"`{thread.session_id}` now answers with `{rest}`.")
        else:
            await self._tell(command, HELP)

    async def _post(self, command: Commanded, info: SessionInfo, what: str) -> None:
        """Post the message whose thread continues *info*, map the thread to it, then say so
        to the user (so the thread is the session's once the user is told)."""
        title = f" ({info.title})" if info.title else ""
        posted = await self._web.call(
            "chat.postMessage", channel=command.channel,
            text=f"{what} `{info.id}`{title} in `{info.location.directory}`: reply in this thread.",
        )  # fmt: skip
        await self._threads.put(
            Thread(
                team=command.team, channel=command.channel, ts=str(posted["ts"]),
                session_id=info.id, owner=command.user, used=int(time.time() * 1000),
            )
        )  # fmt: skip
        await self._tell(command, f"Reply in the thread of that message to talk to `{info.id}`.")

    async def _list(self, command: Commanded) -> str:
        sessions, _ = await self._backend.sessions(LIST_LIMIT, None)
        if not sessions:
            return "No sessions yet."
        return "\n".join(
            f"`{info.id}` {info.title or '(untitled)'} · `{info.location.directory}`"
            for info in sessions
        )

    async def _latest(self, command: Commanded) -> Thread | None:
        thread = self._threads.latest(command.team, command.channel, command.user)
        if thread is None:
            await self._tell(command, "You have no session thread in this channel.")
        return thread

    async def _tell(self, command: Commanded, text: str) -> None:
        await self._web.call(
            "chat.postEphemeral", channel=command.channel, user=command.user, text=text
        )
