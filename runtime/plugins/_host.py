"""A Location's plugins: loading, readiness, and calling their hooks in isolation.

Each open Location has one :class:`PluginHost` with a pluggy ``PluginManager`` of its own,
made (and pluggy imported) when its first plugin is registered: a Location without plugins
never loads pluggy or the hook specifications.
Hooks are called one implementation at a time, in load order (``tryfirst``/``trylast``
respected), each bounded by ``PluginLimits.hook_timeout``. A hook that raises or times out
is logged, recorded as the plugin's last error, reported to ``on_error`` (the runtime
publishes it as ``plugin.error``) and skipped; for a plugin that declared itself
``required``, :class:`PluginHookError` is raised instead, so the caller fails.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import trio

from runtime.context import ContributionHandle, SystemContext, SystemContextRegistry
from runtime.plugins._auth import ProviderAuth
from runtime.plugins._context import PluginContext
from runtime.plugins._functions import as_tool
from runtime.plugins._load import PluginCandidate
from runtime.plugins._status import (
    PluginFailure,
    PluginHookError,
    PluginLimits,
    PluginsNotReady,
    PluginState,
    PluginStatus,
)
from runtime.plugins._values import PROJECT_NAME
from runtime.tools import ToolContribution, ToolRegistry

if TYPE_CHECKING:
    import pluggy

__all__ = ["PluginHost", "namespace"]

_log = logging.getLogger("kittiwake.plugins")
_NAMESPACE: Final = re.compile(r"[^a-z0-9._-]+")


def namespace(name: str) -> str:
    """The namespace of a plugin called *name*: its Context Source keys are
    ``<namespace>/...``, its contribution ``plugin/<namespace>``."""
    cleaned = _NAMESPACE.sub("-", name.lower()).strip("-._")
    return cleaned or "plugin"


class _Plugin:
    """One plugin loaded (or failing to load) in a Location."""

    def __init__(self, candidate: PluginCandidate) -> None:
        self.candidate = candidate
        self.name = candidate.name
        self.state: PluginState = "loading"
        self.required = False
        self.obj: Any = None
        self.error: str | None = None
        self.errors = 0
        self.tools: ToolContribution | None = None
        self.context: ContributionHandle | None = None
        self.last_context: SystemContext = SystemContext.EMPTY
        self.providers: dict[str, Any] = {}
        self.auth: list[ProviderAuth] = []
        self.configured: dict[str, Any] | None = None
        """The configuration its ``config`` hook was last given (None: not yet)."""

    @property
    def namespace(self) -> str:
        """Its Context Sources' namespace: from the plugin's own ``name`` when it has one
        (a plugin knows its keys), else from the name it was found under."""
        declared = getattr(self.obj, "name", None)
        return namespace(declared if isinstance(declared, str) and declared else self.name)

    def status(self, hooks: list[str]) -> PluginStatus:
        c = self.candidate
        return PluginStatus(
            name=self.name, source=c.source, origin=c.origin, state=self.state,
            required=self.required, hooks=hooks, error=self.error, errors=self.errors,
        )  # fmt: skip


Impl: TypeAlias = "tuple[pluggy.HookImpl, _Plugin]"


class PluginHost:
    """The plugins of the Location *directory*; see the module docstring.

    Args:
        registry / context: the Location's Tool Registry and System Context Registry, which
            plugins' tools and Context Sources join as contributions of their own.
        make_context: the :class:`PluginContext` handed to a plugin's factory.
        limits: timeouts and queue bounds.
        on_error: told every failure (never blocks).

    Whoever opens the Location runs :meth:`run` in a nursery; :meth:`sync` hands it the
    plugins the configuration names.
    """

    def __init__(
        self, directory: str, *, registry: ToolRegistry, context: SystemContextRegistry,
        make_context: Callable[[PluginCandidate], PluginContext],
        limits: PluginLimits | None = None, on_error: Callable[[PluginFailure], None] | None = None,
    ) -> None:  # fmt: skip
        self.directory = directory
        self.registry = registry
        self.context = context
        self.limits = limits or PluginLimits()
        self.on_error = on_error
        self._make_context = make_context
        self._manager: pluggy.PluginManager | None = None
        """pluggy's manager, made by the first registration (``_plugin_manager``)."""
        self._plugins: list[_Plugin] = []
        self._impls: dict[str, list[Impl]] = {}
        self._used: frozenset[str] | None = None
        self._desired: list[PluginCandidate] = []
        self._config: dict[str, Any] = {}
        self._changed = trio.Event()
        self._settled = trio.Event()
        self._settled.set()
        self.dropped_events = 0
        self.reloads = 0

    # -- loading ----------------------------------------------------------------------

    def sync(self, candidates: Iterable[PluginCandidate], config: dict[str, Any]) -> None:
        """Have :meth:`run` load *candidates* (and unload the others), then tell each the
        configuration *config*. Never blocks."""
        self._desired, self._config = list(candidates), config
        if not self._desired and not self._plugins:
            return  # nothing to load or unload: settled as it is
        if self._settled.is_set():
            self._settled = trio.Event()
        self._changed.set()

    @property
    def settled(self) -> bool:
        """No load is pending or under way."""
        return self._settled.is_set()

    async def wait_settled(self) -> None:
        """Wait until no load is pending or under way (loaded or failed, every plugin)."""
        while not self._settled.is_set():
            await self._settled.wait()

    async def wait_ready(self) -> None:
        """Wait until no load is pending or under way.

        Raises:
            PluginsNotReady: a required plugin failed to load (it says which and why).
        """
        await self.wait_settled()
        failed = [p for p in self._plugins if p.required and p.state == "failed"]
        if failed:
            raise PluginsNotReady(
                "; ".join(f"required plugin {p.name} failed: {p.error}" for p in failed)
            )

    async def wait_loaded(self, hook: str) -> None:
        """Wait until no plugin that may implement *hook* is loading: one whose class,
        module or object declares it, or one a factory makes (what it makes is not known
        before it runs). Plugins that cannot implement *hook* hold nothing up; a failed
        load ends the wait as a finished one does. Cancellation stops waiting."""
        done = {p.candidate.key for p in self._plugins if p.state != "loading"}
        if not self._settled.is_set() and any(
            _may_implement(c, hook) for c in self._desired if c.key not in done
        ):
            await self.wait_settled()

    def failed_required(self) -> list[PluginStatus]:
        """The required plugins that failed to load (a served runtime stops for them)."""
        return [s for s in self.statuses() if s.required and s.state == "failed"]

    async def run(self) -> None:
        """Apply each :meth:`sync` until cancelled. Cancellation leaves the plugins as
        they are (the Location is going away with the runtime)."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            await self._apply(self._desired, self._config)
            if not self._changed.is_set():
                self._settled.set()

    async def _apply(self, desired: list[PluginCandidate], config: dict[str, Any]) -> None:
        keys = {c.key for c in desired}
        for gone in [p for p in self._plugins if p.candidate.key not in keys]:
            await self._unload(gone)
        loaded = {p.candidate.key: p for p in self._plugins}
        for candidate in desired:
            plugin = loaded.get(candidate.key)
            if plugin is None:
                await self._load(candidate, config)
            elif plugin.state == "ready":
                await self._configure(plugin, config)
        self.reloads += 1

    async def _load(self, candidate: PluginCandidate, config: dict[str, Any]) -> None:
        plugin = _Plugin(candidate)
        self._plugins.append(plugin)
        if candidate.error is not None:
            self._load_failed(plugin, candidate.error)
            return
        plugin.required = bool(getattr(candidate.target, "required", False))
        try:
            with trio.fail_after(self.limits.init_timeout):
                obj = await self._instantiate(candidate)
                plugin.required = plugin.required or bool(getattr(obj, "required", False))
                self._register(plugin, obj)
                await self._contribute(plugin, strict=True)
        except trio.TooSlowError:
            self._load_failed(plugin, f"not ready within {self.limits.init_timeout:g} s")
            return
        except PluginHookError:  # a required plugin's hook failed (reported already)
            self._load_failed(plugin, None)
            return
        except Exception as exc:  # the plugin's own code, or an invalid plugin
            self._load_failed(plugin, f"{type(exc).__name__}: {exc}")
            return
        plugin.state = "ready"
        plugin.configured = dict(config)
        await self._call("config", {"config": dict(config)}, only=plugin)
        _log.info("plugin loaded", extra={"plugin": plugin.name, "location": self.directory})

    async def _instantiate(self, candidate: PluginCandidate) -> Any:
        """The plugin object: a module or object with hooks as it is; a callable (a class,
        a factory function, or a module's ``plugin``) called with its context and options."""
        target = candidate.target
        factory: Any = None
        if inspect.isclass(target) or inspect.isroutine(target):
            factory = target
        elif inspect.ismodule(target) and not _has_hooks(target):
            factory = getattr(target, "plugin", None)
        if factory is None:
            return target
        if not callable(factory):
            raise TypeError(f"the module's 'plugin' is not callable: {factory!r}")
        made = factory(self._make_context(candidate), dict(candidate.options))
        made = await made if inspect.isawaitable(made) else made
        if made is None:
            raise TypeError(f"{factory!r} made no plugin (it returned None)")
        return made

    def _plugin_manager(self) -> pluggy.PluginManager:
        """pluggy's manager of this Location's plugins, made (importing pluggy and the hook
        specifications) at the first call."""
        if self._manager is None:
            import pluggy

            from runtime.plugins._spec import PluginSpec

            self._manager = pluggy.PluginManager(PROJECT_NAME)
            self._manager.add_hookspecs(PluginSpec)
        return self._manager

    def _registered(self, obj: Any) -> bool:
        return self._manager is not None and self._manager.is_registered(obj)

    def _register(self, plugin: _Plugin, obj: Any) -> None:
        """Register *obj*'s hooks; refuse unknown hooks, unmarked hook functions and
        wrappers (each named in the error)."""
        manager = self._plugin_manager()
        taken = {name for name, _ in manager.list_name_plugin()}
        name, n = plugin.name, 1
        while name in taken:
            n += 1
            name = f"{plugin.name}#{n}"
        manager.register(obj, name=name)
        plugin.obj = obj
        try:
            _check(manager, obj)
        except ValueError:
            manager.unregister(obj)
            plugin.obj = None
            raise
        self._forget_impls()

    async def _contribute(self, plugin: _Plugin, *, strict: bool) -> None:
        """Offer the plugin's tools and Context Sources (``strict``: a failure raises,
        else it is the plugin's error and the tools offered before stay)."""
        try:
            tools = [as_tool(t) for result in await self._call("tool", {}, only=plugin, raising=strict)
                     for t in (result if isinstance(result, list | tuple) else [result])]  # fmt: skip
            contribution = self.registry.contribute(tools) if tools else None
        except (TypeError, ValueError) as exc:
            if strict:
                raise
            self._failed(plugin, "tool", f"{type(exc).__name__}: {exc}")
            return
        if plugin.tools is not None:
            plugin.tools.close()
        plugin.tools = contribution
        providers: dict[str, Any] = {}
        for answer in await self._call("provider", {}, only=plugin, raising=strict):
            if isinstance(answer, dict) and all(isinstance(v, dict) for v in answer.values()):
                providers.update(answer)
            else:
                self._failed(
                    plugin, "provider", "answered something other than {id: entry}", raising=strict
                )
        plugin.providers = providers
        logins: list[ProviderAuth] = []
        for answer in await self._call("auth", {}, only=plugin, raising=strict):
            found = answer if isinstance(answer, list | tuple) else [answer]
            if all(isinstance(a, ProviderAuth) for a in found):
                logins.extend(found)
            else:
                self._failed(plugin, "auth", "answered something other than ProviderAuth",
                             raising=strict)  # fmt: skip
        plugin.auth = logins
        if plugin.context is None and self._implements(plugin, "context_source"):
            key = f"plugin/{plugin.namespace}"
            plugin.context = self.context.contribute(key, lambda: self._sources(plugin))

    async def _configure(self, plugin: _Plugin, config: dict[str, Any]) -> None:
        """Give *plugin* the effective configuration, once per change of it (a reload
        that finds the same configuration, another file of the Location having changed,
        calls no hook)."""
        if plugin.configured == config:
            return
        plugin.configured = dict(config)
        await self._call("config", {"config": dict(config)}, only=plugin)
        if plugin.state == "ready":
            await self._contribute(plugin, strict=False)

    async def _unload(self, plugin: _Plugin) -> None:
        if plugin.state == "ready":
            await self._call("dispose", {}, only=plugin)
        for handle in (plugin.tools, plugin.context):
            if handle is not None:
                handle.close()
        if plugin.obj is not None and self._registered(plugin.obj):
            self._plugin_manager().unregister(plugin.obj)
        self._plugins.remove(plugin)
        self._forget_impls()

    def _load_failed(self, plugin: _Plugin, message: str | None) -> None:
        """Mark *plugin* failed, withdraw what it offered and report *message* (``None``:
        reported already)."""
        plugin.state = "failed"
        if plugin.obj is not None and self._registered(plugin.obj):
            self._plugin_manager().unregister(plugin.obj)
            self._forget_impls()
        for handle in (plugin.tools, plugin.context):
            if handle is not None:
                handle.close()
        plugin.tools = plugin.context = None
        if message is not None:  # a required plugin's load failure is wait_ready's to raise
            self._failed(plugin, "load", message, raising=False)

    async def _sources(self, plugin: _Plugin) -> SystemContext:
        """The plugin's Context Sources for one registry load; on a failure, the last ones it
        gave (so the admitted values stand)."""
        try:
            results = await self._call("context_source", {}, only=plugin)
        except PluginHookError:
            return plugin.last_context
        try:
            sources = [
                r
                for result in results
                for r in (result if isinstance(result, list | tuple) else [result])
            ]
            combined = SystemContext.combine(*sources)
            prefix = plugin.namespace + "/"
            stray = [k for k in combined.keys if not k.startswith(prefix)]
            if stray:
                raise ValueError(f"Context Source keys must start with {prefix!r}: {stray}")
        except Exception as exc:  # a value that is not a SystemContext, or a key outside
            self._failed(plugin, "context_source", f"{type(exc).__name__}: {exc}", raising=False)
            return plugin.last_context
        plugin.last_context = combined
        return combined

    # -- calling hooks ------------------------------------------------------------------

    def _forget_impls(self) -> None:
        self._impls.clear()
        self._used = None

    @property
    def used(self) -> frozenset[str]:
        """The hooks some loaded plugin implements (kept until one is loaded or unloaded)."""
        if self._used is None:
            if self._manager is None:  # no plugin was ever registered
                return frozenset()
            from runtime.plugins._spec import HOOK_NAMES

            self._used = frozenset(h for h in HOOK_NAMES if self.implementations(h))
        return self._used

    def implementations(self, hook: str) -> list[Impl]:
        """The implementations of *hook* in call order: ``tryfirst`` ones, the others in
        load order, then ``trylast`` ones."""
        found = self._impls.get(hook)
        if found is None:
            if self._manager is None:  # no plugin was ever registered
                return []
            by_obj = {id(p.obj): p for p in self._plugins if p.obj is not None}
            impls = getattr(self._manager.hook, hook).get_hookimpls()
            ordered = sorted(impls, key=lambda i: 0 if i.tryfirst else 2 if i.trylast else 1)
            found = self._impls[hook] = [
                (i, by_obj[id(i.plugin)]) for i in ordered if id(i.plugin) in by_obj
            ]
        return found

    def _implements(self, plugin: _Plugin, hook: str) -> bool:
        return any(p is plugin for _, p in self.implementations(hook))

    async def _call(
        self, hook: str, kwargs: dict[str, Any], *, only: _Plugin | None = None,
        raising: bool = True,
    ) -> list[Any]:  # fmt: skip
        """Every implementation's answer that is not ``None``, in call order (of *only*'s,
        when given). Failures are contained (see the module docstring)."""
        answers: list[Any] = []
        for impl, plugin in self.implementations(hook):
            if only is not None and plugin is not only:
                continue
            ok, answer = await self.invoke(impl, plugin, hook, kwargs, raising=raising)
            if ok and answer is not None:
                answers.append(answer)
        return answers

    async def invoke(
        self, impl: pluggy.HookImpl, plugin: _Plugin, hook: str, kwargs: dict[str, Any], *,
        raising: bool = True,
    ) -> tuple[bool, Any]:  # fmt: skip
        """Call one implementation with the arguments it names: ``(True, answer)``, or
        ``(False, None)`` after a failure was recorded. Awaiting an async hook is bounded by
        the hook timeout; a plain one runs to its end on this thread (it must not block).

        Raises:
            PluginHookError: the plugin is required (and *raising*).
        """
        message: str | None = None
        try:
            answer = impl.function(*(kwargs[name] for name in impl.argnames))
        except Exception as exc:  # the plugin's code: contained
            message = f"{type(exc).__name__}: {exc}"
        else:
            if not inspect.isawaitable(answer):  # a plain hook: nothing to bound
                return True, answer
            with trio.move_on_after(self.limits.hook_timeout):
                try:
                    return True, await answer
                except Exception as exc:  # the plugin's code: contained
                    message = f"{type(exc).__name__}: {exc}"
            if message is None:
                message = f"timed out after {self.limits.hook_timeout:g} s"
        self._failed(plugin, hook, message, raising=raising)
        return False, None

    def _failed(self, plugin: _Plugin, hook: str, message: str, *, raising: bool = True) -> None:
        plugin.error, plugin.errors = f"{hook}: {message}", plugin.errors + 1
        _log.warning(
            "plugin %s failed in %s: %s", plugin.name, hook, message,
            extra={"plugin": plugin.name, "hook": hook, "location": self.directory},
        )  # fmt: skip
        if self.on_error is not None:
            self.on_error(PluginFailure(
                plugin=plugin.name, hook=hook, message=message, directory=self.directory,
                required=plugin.required,
            ))  # fmt: skip
        if plugin.required and raising:
            raise PluginHookError(f"required plugin {plugin.name} failed in {hook}: {message}")

    @property
    def providers(self) -> dict[str, Any]:
        """The provider entries the loaded plugins offer (``provider``), later plugins
        winning for the same id."""
        merged: dict[str, Any] = {}
        for plugin in self._plugins:
            if plugin.state == "ready":
                merged.update(plugin.providers)
        return merged

    def logins(self) -> dict[str, tuple[_Plugin, ProviderAuth]]:
        """The providers' login methods the loaded plugins offer (``auth``), by provider id,
        later plugins winning for the same id."""
        merged: dict[str, tuple[_Plugin, ProviderAuth]] = {}
        for plugin in self._plugins:
            if plugin.state == "ready":
                merged.update((a.provider, (plugin, a)) for a in plugin.auth)
        return merged

    def statuses(self) -> list[PluginStatus]:
        """Every plugin of the Location, in load order."""
        return [p.status(self._hooks_of(p)) for p in self._plugins]

    def _hooks_of(self, plugin: _Plugin) -> list[str]:
        if plugin.obj is None or not self._registered(plugin.obj):
            return []
        callers = self._plugin_manager().get_hookcallers(plugin.obj) or []
        return sorted(caller.name for caller in callers)

    def hook_failed(self, plugin: _Plugin, hook: str, message: str) -> None:
        """Record a plugin's invalid answer to *hook* as its failure (never raises)."""
        self._failed(plugin, hook, message, raising=False)


def _has_hooks(target: Any) -> bool:
    """Whether *target* itself carries marked hook implementations (a module or object
    registered as it is, even when it also has a ``plugin`` attribute)."""
    from runtime.plugins._spec import HOOK_NAMES

    marker = f"{PROJECT_NAME}_impl"
    return any(
        getattr(getattr(target, name, None), marker, None) is not None for name in HOOK_NAMES
    )


def _may_implement(candidate: PluginCandidate, hook: str) -> bool:
    """Whether the plugin *candidate* makes may implement *hook* (see ``wait_loaded``)."""
    target = candidate.target
    if candidate.error is not None or target is None:
        return False
    if inspect.isroutine(target):
        return True  # a factory: what it makes is known once it ran
    if inspect.ismodule(target) and not _has_hooks(target):
        return getattr(target, "plugin", None) is not None
    return getattr(getattr(target, hook, None), f"{PROJECT_NAME}_impl", None) is not None


def _check(manager: pluggy.PluginManager, obj: Any) -> None:
    """Raise ``ValueError`` naming what is wrong with *obj*'s hooks: a hook name the SDK
    does not have, a wrapper, or a function named like a hook but not marked ``@hookimpl``
    (which would never be called)."""
    from runtime.plugins._spec import HOOK_NAMES

    problems: list[str] = []
    marked: set[str] = set()
    for caller in manager.get_hookcallers(obj) or []:
        marked.add(caller.name)
        if not caller.has_spec():
            problems.append(f"unknown hook {caller.name!r}")
        for impl in caller.get_hookimpls():
            if impl.plugin is obj and (impl.wrapper or impl.hookwrapper):
                problems.append(f"hook {caller.name!r} is a wrapper (not supported)")
    for name in sorted(HOOK_NAMES - marked):
        if inspect.isroutine(getattr(obj, name, None)):
            problems.append(f"{name!r} is not marked @hookimpl")
    if problems:
        raise ValueError("; ".join(problems) + f" (the hooks are: {', '.join(sorted(HOOK_NAMES))})")
