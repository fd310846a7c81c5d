"""The plugins' ``chat_message`` hook at admission: ``Sessions.prompt``, which every prompt
of every surface passes, asks it once before the durable write, so the stored prompt is
the plugins' and an exact retry of an admitted message id is answered by the store
without asking again."""

from __future__ import annotations

from actors.session import SessionExecution, session_model
from actors.store import StorageActor
from runtime import OperationUnavailableError, Prompt, SessionInfo, SessionNotFoundError
from runtime import events as ev
from runtime.plugins import ChatMessage, PluginHookError
from storage import AdmittedInput, GetSession

__all__ = ["admission_prompt"]


async def admission_prompt(
    execution: SessionExecution, storage: StorageActor, session_id: str, message_id: str,
    prompt: Prompt, delivery: ev.Delivery, *, retry: bool,
) -> Prompt:  # fmt: skip
    """The prompt to admit as *message_id*: *prompt* as the session's Location's plugins'
    ``chat_message`` leave it (each call bounded by the plugins' hook timeout; a failing
    one is reported as ``plugin.error`` and skipped). When a caller chose the id
    (*retry*) and it is admitted already in this session with this delivery, the stored
    prompt, unasked (the store then answers the exact retry with its receipt).

    With no plugin implementing the hook this reads nothing and awaits nothing when the
    session's Location is known here; otherwise the session is read once. It waits for
    the Location's plugins only while one that may implement the hook is loading.

    Raises:
        SessionNotFoundError: no such session.
        OperationUnavailableError: a required plugin's hook failed; nothing is written.
    Cancellation abandons the hooks; nothing is written.
    """
    info: SessionInfo | None = None
    directory = execution.plugins.directory_of(session_id)
    if directory is None:
        info = await _session(storage, session_id)
        directory = info.location.directory
        execution.plugins.remember(session_id, directory)
    location = await execution.location(directory)
    plugins = location.plugins
    await plugins.wait_loaded("chat_message")
    if not plugins.implementations("chat_message"):
        return prompt
    if retry:
        admitted = await storage.read(AdmittedInput(message_id=message_id))
        if admitted is not None and (admitted.session_id, admitted.delivery) == (
            session_id, delivery,
        ):  # fmt: skip
            return admitted.prompt
    if info is None:
        info = execution.known_info(session_id) or await _session(storage, session_id)
    agent = location.agent(info.agent if isinstance(info.agent, str) else None)
    model = session_model(info, agent, location.settings, execution.default_model)
    message = ChatMessage(
        session_id=session_id, message_id=message_id, directory=directory, agent=agent.name,
        provider_id=model.provider_id, model_id=model.id, delivery=delivery,
    )  # fmt: skip
    try:
        return await plugins.chat_message(message, prompt)
    except PluginHookError as exc:
        raise OperationUnavailableError(f"The prompt was not admitted: {exc}") from None


async def _session(storage: StorageActor, session_id: str) -> SessionInfo:
    info = await storage.read(GetSession(session_id=session_id))
    if info is None:
        raise SessionNotFoundError(session_id)
    return info
