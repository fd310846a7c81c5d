"""Writing a session's title with a small model, beside its first provider turn."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from actors.store import StorageActor
from runtime import SessionInfo, UserMessage, llm
from runtime import events as ev
from runtime.history import to_llm_model
from runtime.titles import TitleLimits, clean_title, needs_title, title_request
from storage import SetTitle

if TYPE_CHECKING:
    from actors.session._ports import SessionLocation, SessionPorts

__all__ = ["TitleModel", "first_prompt", "title_soon", "write_title"]

TitleModel = Callable[[ev.ModelRef], ev.ModelRef | None]
"""Given the model of a session's first turn, the model that writes its title (None: no
title is written)."""

_log = logging.getLogger("kittiwake.titles")


def first_prompt(
    title_model: TitleModel | None, info: SessionInfo, rows: Sequence[tuple[int, Any]],
    promoted: list[ev.InputAdmitted],
) -> str | None:  # fmt: skip
    """The text of the session's first prompt if *promoted* holds it (no user message of
    the history *rows* precedes it) and a title is to be written (*title_model*); else
    None."""
    if title_model is None or not needs_title(info):
        return None
    ids = {row.id for row in promoted}
    for _, message in rows:
        if isinstance(message, UserMessage) and message.id not in ids:
            return None  # an earlier prompt: the session is not new
    return promoted[0].prompt.text


def title_soon(
    nursery: trio.Nursery | None, ports: SessionPorts, location: SessionLocation,
    session_id: str, prompt: str, model: ev.ModelRef,
) -> None:  # fmt: skip
    """Start :func:`write_title` in *nursery* (beside the session's first turn, made with
    *model*): the Location's ``small_model``, else the runtime's title model of *model*;
    nothing when there is neither, or no nursery."""
    assert ports.title_model is not None  # a prompt to title was kept: titles are on
    small = location.settings.small_model or ports.title_model(model)
    if small is not None and nursery is not None:
        nursery.start_soon(
            partial(
                write_title, session_id=session_id, prompt=prompt, model=small,
                client=ports.client_for(location), storage=ports.storage, now_ms=ports.now_ms,
                limits=ports.title_limits,
            )
        )  # fmt: skip


async def write_title(
    *, session_id: str, prompt: str, model: ev.ModelRef, client: llm.LLMClient,
    storage: StorageActor, now_ms: Callable[[], int], limits: TitleLimits,
) -> SessionInfo | None:  # fmt: skip
    """Ask *model* for a title of the session whose first prompt is *prompt*; record it as
    a durable ``session.updated`` event if the session still has its placeholder title.

    Returns the updated info, or None when nothing was written. Failure (a provider error,
    an unusable answer, *limits.timeout* passing, a failed write, the session deleted or
    titled meanwhile) is logged and leaves the placeholder. Cancellation propagates;
    nothing is written then.
    """
    request = title_request(to_llm_model(model), prompt, limits)
    answer: str | None = None
    with trio.move_on_after(limits.timeout) as timer:
        try:
            answer = await _answer(client, request)
        except Exception as exc:  # noqa: BLE001 - a failed title leaves the placeholder
            _log.warning(
                "title not written: the request failed",
                extra={"session": session_id, "model": f"{model.provider_id}/{model.id}"},
                exc_info=exc,
            )
            return None
    if timer.cancelled_caught:
        _log.warning(
            "title not written: no answer in time",
            extra={"session": session_id, "timeout": limits.timeout},
        )
        return None
    title = clean_title(answer or "")
    if title is None:
        _log.warning("title not written: empty answer", extra={"session": session_id})
        return None
    try:
        return await storage.write(SetTitle(session_id=session_id, title=title, timestamp=now_ms()))
    except Exception as exc:  # noqa: BLE001 - a failed title leaves the placeholder
        _log.warning("title not recorded", extra={"session": session_id}, exc_info=exc)
        return None


async def _answer(client: llm.LLMClient, request: llm.LLMRequest) -> str:
    """The text of one streamed answer, read to its end. Raises ``RuntimeError`` when the
    stream carried a provider error event."""
    parts: list[str] = []
    error: llm.ProviderError | None = None
    async for event in client.stream(request):
        if isinstance(event, llm.TextDelta):
            parts.append(event.delta)
        elif isinstance(event, llm.ProviderError):
            error = event
    if error is not None:
        raise RuntimeError(f"{error.kind}: {error.message}")
    return "".join(parts)
