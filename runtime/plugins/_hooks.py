"""Where the runtime calls a Location's plugins: every tool call (``ToolHooks``), every
provider request, commands, compactions, and the sessions' events."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import msgspec
import trio

from runtime import InvalidInputError, Prompt
from runtime.agents import PermissionAction
from runtime.inbox import check_prompt
from runtime.llm import AuthError, Credential, GenerationControls, LLMRequest, ToolDefinition
from runtime.plugins._auth import (
    AuthFailed,
    AuthMethod,
    Credentials,
    OAuthAuthorization,
    is_credential,
)
from runtime.plugins._functions import tool_call_of
from runtime.plugins._host import PluginHost
from runtime.plugins._load import PluginCandidate
from runtime.plugins._status import PluginHookError
from runtime.plugins._values import (
    ChatInfo,
    ChatMessage,
    ChatParams,
    CommandCall,
    CompactionPrompt,
    PermissionAsk,
    PluginEvent,
    Refusal,
    SessionRef,
    ShellEnvInfo,
)
from runtime.tools import ToolContext, ToolFailure, ToolOutput

__all__ = ["LocationPlugins"]

_ACTIONS: Final = ("allow", "deny", "ask")
_EVENT_HOOKS: Final = frozenset({"event", "session_error"})
_RUN_FAILED: Final = "session.run.failed"
_TOOL_HOOKS: Final = frozenset(
    {"tool_execute_before", "permission_ask", "tool_execute_after", "shell_env"}
)
_REQUEST_HOOKS: Final = frozenset(
    {"chat_params", "chat_headers", "system_transform", "tool_definition"}
)


class _Event(msgspec.Struct, frozen=True):
    type: str
    session_id: str
    seq: int
    data: bytes


class _Idle(msgspec.Struct, frozen=True):
    session_id: str


class LocationPlugins(PluginHost):
    """A Location's :class:`PluginHost` and the places the runtime calls it: as the Tool
    Registry's ``hooks`` (every call of every tool), and for provider requests, commands,
    compactions and session events. With no plugin implementing a hook, its call costs a
    dictionary look-up and nothing is awaited."""

    def __init__(
        self, directory: str, *, credentials: Credentials | None = None, **options: Any
    ) -> None:
        super().__init__(directory, **options)
        self._events_in, self._events_out = trio.open_memory_channel[_Event | _Idle](
            self.limits.event_queue
        )
        self._credentials = credentials
        self._pending: dict[str, tuple[int, OAuthAuthorization]] = {}
        self.auth_options: dict[str, dict[str, Any]] = {}
        """Provider options the ``auth`` loaders gave for the stored credentials, by
        provider id (see :meth:`load_credentials`)."""

    async def _apply(self, desired: list[PluginCandidate], config: dict[str, Any]) -> None:
        """Load and unload as the host does, then be the Tool Registry's hooks exactly while
        a loaded plugin implements one of them (without, a call costs what it did before
        plugins)."""
        await super()._apply(desired, config)
        self.registry.hooks = self if self.used & _TOOL_HOOKS else None

    # -- the Tool Registry's hooks ------------------------------------------------------

    async def before(self, tool: str, input: Any, ctx: ToolContext) -> Any | ToolFailure:
        impls = self.implementations("tool_execute_before")
        if not impls:
            return input
        call = tool_call_of(ctx, tool)
        for impl, plugin in impls:
            try:
                ok, answer = await self.invoke(impl, plugin, "tool_execute_before",
                                               {"call": call, "args": input})  # fmt: skip
            except PluginHookError as exc:
                return ToolFailure(error=str(exc))
            if not ok or answer is None:
                continue
            if isinstance(answer, Refusal):
                return ToolFailure(error=answer.reason)
            input = answer
        return input

    async def decide(
        self, tool: str, permission: str, resources: list[str], ctx: ToolContext,
        action: PermissionAction,
    ) -> PermissionAction:  # fmt: skip
        impls = self.implementations("permission_ask")
        if not impls:
            return action
        call = tool_call_of(ctx, tool)
        for impl, plugin in impls:
            status: Literal["allow", "ask"] = "allow" if action == "allow" else "ask"
            asked = PermissionAsk(
                call=call, permission=permission, resources=resources, status=status
            )
            try:
                ok, answer = await self.invoke(
                    impl, plugin, "permission_ask", {"permission": asked}
                )
            except PluginHookError:
                return "deny"  # a required policy that cannot answer refuses
            if not ok or answer is None:
                continue
            if answer not in _ACTIONS:
                self._invalid(
                    plugin, "permission_ask", f"answered {answer!r}, not one of {_ACTIONS}"
                )
                continue
            action = answer
            if action == "deny":
                return action
        return action

    async def after(
        self, tool: str, input: Any, ctx: ToolContext, outcome: ToolOutput | ToolFailure
    ) -> ToolOutput | ToolFailure:
        impls = self.implementations("tool_execute_after")
        if not impls:
            return outcome
        call = tool_call_of(ctx, tool)
        for impl, plugin in impls:
            try:
                ok, answer = await self.invoke(impl, plugin, "tool_execute_after",
                                               {"call": call, "args": input, "result": outcome})  # fmt: skip
            except PluginHookError as exc:
                return ToolFailure(error=str(exc))
            if ok and answer is not None:
                if isinstance(answer, ToolOutput | ToolFailure):
                    outcome = answer
                else:
                    self._invalid(
                        plugin,
                        "tool_execute_after",
                        f"answered {type(answer).__name__}, not ToolOutput or ToolFailure",
                    )
        return outcome

    async def shell_env(self, ctx: ToolContext, cwd: str) -> Mapping[str, str]:
        impls = self.implementations("shell_env")
        if not impls:
            return {}
        info = ShellEnvInfo(directory=self.directory, cwd=cwd, session_id=ctx.session_id,
                            call_id=ctx.tool_call_id)  # fmt: skip
        overlay: dict[str, str] = {}
        for impl, plugin in impls:
            ok, answer = await self.invoke(impl, plugin, "shell_env", {"info": info})
            if not ok or answer is None:
                continue
            if isinstance(answer, Mapping) and all(isinstance(v, str) for v in answer.values()):
                overlay.update({str(k): v for k, v in answer.items()})
            else:
                self._invalid(
                    plugin, "shell_env", "answered something other than a str -> str mapping"
                )
        return overlay

    # -- provider requests, commands, compactions ----------------------------------------

    def transforms_requests(self) -> bool:
        """Whether any plugin changes provider requests."""
        return bool(self.used & _REQUEST_HOOKS)

    async def transform_request(
        self, request: LLMRequest, session_id: str, agent: str
    ) -> LLMRequest:
        """*request* (a provider turn of session *session_id* under *agent*) as the plugins'
        ``chat_params``, ``chat_headers``, ``system_transform`` and ``tool_definition``
        leave it.

        Raises:
            PluginHookError: a required plugin failed (the provider turn fails).
        """
        if not self.transforms_requests():
            return request
        chat = ChatInfo(
            session_id=session_id, directory=self.directory, agent=agent,
            provider_id=request.model.provider_id, model_id=request.model.model_id,
        )  # fmt: skip
        g = request.generation
        params = ChatParams(
            temperature=g.temperature, top_p=g.top_p, top_k=g.top_k,
            max_output_tokens=g.max_output_tokens, options=dict(request.options),
        )  # fmt: skip
        params = await self._reduce("chat_params", "params", params, ChatParams, chat=chat)
        headers = await self._reduce(
            "chat_headers", "headers", dict(request.headers), dict, chat=chat
        )
        system = await self._reduce(
            "system_transform", "system", list(request.system), list, chat=chat
        )
        tools = [
            await self._reduce("tool_definition", "definition", d, ToolDefinition, chat=chat)
            for d in request.tools
        ]
        generation = GenerationControls(
            temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
            max_output_tokens=params.max_output_tokens, stop=g.stop,
        )  # fmt: skip
        return msgspec.structs.replace(
            request, generation=generation, options=params.options, headers=headers,
            system=system, tools=tools,
        )  # fmt: skip

    async def chat_message(self, message: ChatMessage, prompt: Prompt) -> Prompt:
        """*prompt* (the user message *message*, about to be admitted) as the plugins'
        ``chat_message`` leave it. An answer that is not a ``Prompt`` that could be
        admitted (empty or oversized text, too many attachments) is that plugin's error
        and is ignored; with no implementation, nothing is awaited.

        Raises:
            PluginHookError: a required plugin failed (the prompt is not admitted).
        """
        for impl, plugin in self.implementations("chat_message"):
            ok, answer = await self.invoke(
                impl, plugin, "chat_message", {"message": message, "prompt": prompt}
            )
            if not ok or answer is None:
                continue
            if not isinstance(answer, Prompt):
                self._invalid(
                    plugin, "chat_message", f"answered {type(answer).__name__}, not Prompt"
                )
                continue
            try:
                check_prompt(answer, message.delivery)
            except InvalidInputError as exc:
                self._invalid(
                    plugin, "chat_message", f"answered a prompt that cannot be admitted: {exc}"
                )
                continue
            prompt = answer
        return prompt

    async def command_text(self, command: CommandCall, text: str) -> str:
        """A command's expanded *text* as ``command_execute_before`` leaves it (a required
        plugin's failure raises :class:`PluginHookError`)."""
        return await self._reduce("command_execute_before", "text", text, str, command=command)

    async def compaction(self, session: SessionRef, prompt: CompactionPrompt) -> CompactionPrompt:
        """A compaction's prompt as ``session_compacting`` leaves it."""
        return await self._reduce(
            "session_compacting", "compaction", prompt, CompactionPrompt, session=session
        )

    async def _reduce(self, hook: str, name: str, value: Any, expected: type, **kwargs: Any) -> Any:
        """Hand *value* (as argument *name*) through every implementation of *hook* in call
        order; an answer not of type *expected* is that plugin's error and is ignored."""
        for impl, plugin in self.implementations(hook):
            ok, answer = await self.invoke(impl, plugin, hook, {**kwargs, name: value})
            if not ok or answer is None:
                continue
            if isinstance(answer, expected):
                value = answer
            else:
                self._invalid(
                    plugin, hook, f"answered {type(answer).__name__}, not {expected.__name__}"
                )
        return value

    async def stopping(self, session: SessionRef, continued: int) -> str | None:
        """The text ``session_stopping`` answers to keep *session*'s drain going (the
        plugins' answers, blank-line separated), or ``None`` to let it stop: always once it
        was kept going ``PluginLimits.max_continuations`` times. A failing hook (required
        or not) is recorded and counts as no answer."""
        impls = self.implementations("session_stopping")
        if not impls or continued >= self.limits.max_continuations:
            return None
        texts: list[str] = []
        for impl, plugin in impls:
            ok, answer = await self.invoke(impl, plugin, "session_stopping",
                                           {"session": session, "continued": continued},
                                           raising=False)  # fmt: skip
            if not ok or answer is None:
                continue
            if not isinstance(answer, str):
                message = f"answered {type(answer).__name__}, not str"
                self._invalid(plugin, "session_stopping", message)
            elif answer.strip():
                texts.append(answer)
        return "\n\n".join(texts) or None

    def _invalid(self, plugin: Any, hook: str, message: str) -> None:
        """Record an answer of the wrong shape as the plugin's failure (ignored, even for a
        required plugin: the call goes on as if it had not answered)."""
        self.hook_failed(plugin, hook, message)

    # -- provider logins (auth) --------------------------------------------------------

    def auth_methods(self) -> dict[str, list[AuthMethod]]:
        """The login methods the loaded plugins offer, by provider id."""
        return {provider: auth.methods for provider, (_, auth) in self.logins().items()}

    async def authorize(
        self, provider: str, method: int, inputs: Mapping[str, str]
    ) -> OAuthAuthorization:
        """Start *provider*'s ``oauth`` method number *method* with the prompts' *inputs*;
        the authorization waits for :meth:`finish` (one per provider, the last started).

        Raises:
            AuthFailed: no such ``oauth`` method, or its ``authorize`` failed (recorded as
                the plugin's ``auth`` error) or answered no ``OAuthAuthorization``.
        """
        plugin, chosen = self._login(provider, method)
        answer = await self._login_call(
            plugin, chosen.authorize, dict(inputs), seconds=self.limits.hook_timeout
        )
        if not isinstance(answer, OAuthAuthorization) or not callable(answer.callback):
            message = f"authorize answered {type(answer).__name__}, not OAuthAuthorization"
            self.hook_failed(plugin, "auth", message)
            raise AuthFailed(message)
        self._pending[provider] = (method, answer)
        return answer

    async def finish(self, provider: str, method: int, code: str | None) -> Credential:
        """End the authorization :meth:`authorize` started for *provider*: its callback,
        with *code* for a ``code`` method, answers the credential to store (bounded by
        ``PluginLimits.login_timeout``). The authorization ends with it, whatever the
        callback did (a failure, or cancellation, needs a new :meth:`authorize`).

        Raises:
            AuthFailed: none started with *method*, a ``code`` method without a code, or
                the callback failed or answered no credential.
        """
        pending = self._pending.get(provider)
        if pending is None or pending[0] != method:
            raise AuthFailed(
                f"no authorization of {provider} was started with method {method}",
                "ProviderAuthOauthMissing",
            )
        authorization = pending[1]
        if authorization.method == "code" and not code:
            raise AuthFailed("the authorization code is missing", "ProviderAuthOauthCodeMissing")
        plugin, _ = self._login(provider, method)
        args = (code,) if authorization.method == "code" else ()
        try:
            answer = await self._login_call(
                plugin, authorization.callback, *args, seconds=self.limits.login_timeout
            )
        finally:  # one callback per authorization, whatever it answered
            if self._pending.get(provider) is pending:
                del self._pending[provider]
        if not is_credential(answer):
            message = f"the callback answered {type(answer).__name__}, not a credential"
            self.hook_failed(plugin, "auth", message)
            raise AuthFailed(message)
        return answer

    def _login(self, provider: str, method: int) -> tuple[Any, AuthMethod]:
        found = self.logins().get(provider)
        methods = found[1].methods if found is not None else []
        if not 0 <= method < len(methods) or methods[method].type != "oauth":
            raise AuthFailed(
                f"{provider} has no oauth login method {method}", "ProviderAuthOauthMissing"
            )
        assert found is not None
        return found[0], methods[method]

    async def _login_call(
        self, plugin: Any, function: Callable[..., Any], *args: Any, seconds: float
    ) -> Any:
        """*function* (a plugin's, async or not) called with *args*, awaited for *seconds*
        at most. :class:`AuthFailed` it raises goes on as it is; another failure is the
        plugin's ``auth`` error, raised as :class:`AuthFailed`."""
        message: str | None = None
        try:
            answer = function(*args)
            if not inspect.isawaitable(answer):
                return answer
            with trio.move_on_after(seconds):
                return await answer
            message = f"timed out after {seconds:g} s"
        except AuthFailed:
            raise
        except Exception as exc:  # the plugin's code: contained
            message = f"{type(exc).__name__}: {exc}"
        self.hook_failed(plugin, "auth", message)
        raise AuthFailed(message)

    async def load_credentials(self) -> None:
        """Run each ``auth`` loader with its provider's stored credential, keeping what it
        answers in :attr:`auth_options` (a provider without a credential, or whose loader
        failed, has none). Costs nothing while no plugin implements ``auth``."""
        if "auth" not in self.used or self._credentials is None:
            self.auth_options = {}
            return
        options: dict[str, dict[str, Any]] = {}
        for provider, (plugin, auth) in self.logins().items():
            try:
                credential = None if auth.loader is None else self._credentials(provider)
            except AuthError:  # a corrupt store: the provider turn reports it
                credential = None
            if auth.loader is None or credential is None:
                continue
            try:
                answer = await self._login_call(
                    plugin, auth.loader, credential, seconds=self.limits.hook_timeout
                )
            except AuthFailed:
                continue
            if isinstance(answer, Mapping):
                options[provider] = dict(answer)
            elif answer is not None:
                self.hook_failed(plugin, "auth", "the loader answered no options mapping")
        self.auth_options = options

    # -- session events ---------------------------------------------------------------

    def notify_event(self, type: str, session_id: str, seq: int, data: bytes) -> None:
        """Queue a committed event for the ``event`` (and, for ``session.run.failed``,
        ``session_error``) hooks; never blocks (a full queue drops it and counts)."""
        if self.used & _EVENT_HOOKS:
            self._queue(_Event(type, session_id, seq, data))

    def notify_idle(self, session_id: str) -> None:
        """Queue ``session_idle`` for *session_id*; never blocks."""
        if "session_idle" in self.used:
            self._queue(_Idle(session_id))

    def _queue(self, item: _Event | _Idle) -> None:
        try:
            self._events_in.send_nowait(item)
        except trio.WouldBlock:
            self.dropped_events += 1

    async def run(self) -> None:
        """Load what :meth:`sync` names, and deliver queued events, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._deliver)
            await super().run()

    async def _deliver(self) -> None:
        async for item in self._events_out:
            session = SessionRef(session_id=item.session_id, directory=self.directory)
            try:
                if isinstance(item, _Idle):
                    await self._call("session_idle", {"session": session}, raising=False)
                    continue
                properties = msgspec.json.decode(item.data)
                event = PluginEvent(type=item.type, session_id=item.session_id, seq=item.seq,
                                    properties=properties if isinstance(properties, dict) else {})  # fmt: skip
                await self._call("event", {"event": event}, raising=False)
                if item.type == _RUN_FAILED:
                    error = event.properties.get("error") or {}
                    message = (
                        str(error.get("message", "")) if isinstance(error, dict) else str(error)
                    )
                    await self._call(
                        "session_error", {"session": session, "error": message}, raising=False
                    )
            except msgspec.DecodeError:
                continue
