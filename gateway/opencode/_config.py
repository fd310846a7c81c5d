"""Configuration over HTTP (``/config``, ``/global/config``, ``/provider``,
``/config/providers``, V2's ``/api/provider`` and ``/api/model``) and the provider
clients a served runtime builds from it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import trio
from quart import Response

from actors import Runtime
from gateway.http import (
    Answer,
    GatewayError,
    RouteTable,
    encode,
    model_v2_json,
    provider_json,
    provider_v2_json,
)
from runtime import ModelRef
from runtime import llm as llm_package
from runtime.config import (
    ConfigError,
    LoadedConfig,
    global_config_file,
    load_global_config,
    project_config_file,
    write_config_patch,
)

__all__ = ["REDACTED", "config_routes", "redact"]

REDACTED: Final = "[redacted]"
"""What ``GET /config`` shows for an ``apiKey`` or a header value; a ``PATCH`` that
sends it back leaves the stored value as it is."""
_SECRET_KEYS: Final = frozenset({"apiKey"})
_OBJECT: Final = Answer(type=dict[str, Any])
_SECRET_MAPS: Final = frozenset({"headers", "environment"})


def redact(data: Any, *, key: str | None = None) -> Any:
    """*data* with every ``apiKey`` and every header or environment value replaced by
    :data:`REDACTED`."""
    if isinstance(data, dict):
        if key in _SECRET_MAPS:
            return {k: REDACTED for k in data}
        return {k: REDACTED if k in _SECRET_KEYS else redact(v, key=k) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def _unredacted(patch: Any) -> Any:
    """*patch* without the values that are only :data:`REDACTED` echoed back."""
    if isinstance(patch, dict):
        return {k: _unredacted(v) for k, v in patch.items() if v != REDACTED}
    return patch


def _json(body: Any, *, status: int = 200) -> Response:
    return Response(encode(body), status=status, content_type="application/json")


def config_routes(
    table: RouteTable, rt: Runtime, directory_arg: Callable[[], Path],
    located: Callable[[], Awaitable[tuple[Path, dict[str, Any]]]],
) -> None:  # fmt: skip
    """Declare ``GET``/``PATCH /config``, ``GET``/``PATCH /global/config``, ``GET /provider``,
    ``GET /config/providers`` and the V2 ``GET /api/provider[/{id}]`` and ``/api/model``;
    *directory_arg* gives the Location a request names, *located* a V2 request's
    (``location[directory]``) with its ``LocationInfo``."""
    base: dict[str, llm_package.Catalog] = {}

    def env() -> Mapping[str, str]:
        configuration = rt.execution.configuration
        return configuration.env if configuration is not None else os.environ

    async def effective(directory: Path) -> tuple[LoadedConfig, str | None]:
        location = await rt.execution.current_location(str(directory))
        settings = location.settings
        if settings.error is not None:  # its turns fail with the same message
            raise GatewayError("InvalidRequestError", settings.error)
        model = settings.model or rt.execution.default_model
        return settings.loaded, f"{model.provider_id}/{model.id}"

    def shown(loaded: LoadedConfig, model: str | None) -> dict[str, Any]:
        data = redact(loaded.data)
        if model is not None and "model" not in data:
            data["model"] = model
        return data

    async def patch_file(path: str, patch: dict[str, Any]) -> None:
        try:
            await trio.to_thread.run_sync(write_config_patch, path, _unredacted(patch))
        except ConfigError as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None
        except OSError as exc:
            raise GatewayError("UnknownError", f"Cannot write {path}: {exc}") from None

    @table.get(
        "/config", "config.get", "The Location's effective configuration",
        answer=Answer(type=dict[str, Any]), query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def config_get() -> Response:
        return _json(shown(*await effective(directory_arg())))

    @table.patch(
        "/config", "config.update", "Merge into the Location's configuration file",
        body=dict[str, Any], answer=Answer(type=dict[str, Any]), query=("directory",),
    )  # fmt: skip
    async def config_patch(patch: dict[str, Any]) -> Response:
        directory = directory_arg()
        config_file = await trio.to_thread.run_sync(project_config_file, str(directory))
        await patch_file(config_file, patch)
        return _json(shown(*await effective(directory)))

    async def global_loaded() -> LoadedConfig:
        try:
            return await trio.to_thread.run_sync(load_global_config, env())
        except ConfigError as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None

    @table.get(
        "/global/config", "global.config.get", "The global configuration",
        answer=Answer(type=dict[str, Any]),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def global_config_get() -> Response:
        return _json(redact((await global_loaded()).data))

    @table.patch(
        "/global/config", "global.config.update", "Merge into the global configuration file",
        body=dict[str, Any], answer=Answer(type=dict[str, Any]),
    )  # fmt: skip
    async def global_config_patch(patch: dict[str, Any]) -> Response:
        await patch_file(await trio.to_thread.run_sync(global_config_file, env()), patch)
        return _json(redact((await global_loaded()).data))

    async def catalog_of(
        directory: Path,
    ) -> tuple[llm_package.Catalog, dict[str, str | None], str | None]:
        """The Location's catalog, each provider's credential source (None: none), and
        the Location's model as ``provider/model``."""
        loaded, model = await effective(directory)
        if "models.dev" not in base:
            base["models.dev"] = await llm_package.load_catalog(
                cache_path=rt.data_dir / "models-dev.json"
            )
        catalog = base["models.dev"].with_config(loaded.data)
        try:
            stored = await trio.to_thread.run_sync(llm_package.CredentialStore(rt.data_dir).load)
        except llm_package.AuthError:
            stored = {}
        configured = set(loaded.data.get("provider") or {})
        environ = env()
        sources = {
            pid: _source(provider, configured, stored, environ)
            for pid, provider in catalog.providers.items()
        }
        return catalog, sources, model

    async def providers() -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
        catalog, sources, model = await catalog_of(directory_arg())
        every: list[dict[str, Any]] = []
        connected: list[str] = []
        for pid, provider in sorted(catalog.providers.items()):
            source = sources[pid]
            if source is not None:
                connected.append(pid)
            every.append(
                redact(provider_json(provider, connected=source is not None, source=source))
            )
        default = {
            pid: chosen.model_id if chosen is not None else sorted(provider.models)[0]
            for pid, provider in catalog.providers.items()
            if provider.models
            for chosen in [llm_package.provider_default_model(catalog, pid)]
        }
        if (ref := ModelRef.parse(model)) is not None:
            if ref.id in catalog.providers.get(ref.provider_id, _NO_PROVIDER).models:
                default[ref.provider_id] = ref.id
        return every, default, connected

    @table.get(
        "/provider", "provider.list", "Catalog providers", answer=Answer(type=dict[str, Any]),
        query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def provider_list() -> Response:
        every, default, connected = await providers()
        return _json({"all": every, "default": default, "connected": connected})

    @table.get(
        "/config/providers", "config.providers", "Catalog providers",
        answer=Answer(type=dict[str, Any]),
        query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def config_providers() -> Response:
        every, default, _ = await providers()
        return _json({"providers": every, "default": default})

    # -- the V2 catalog -------------------------------------------------------------------

    @table.get(
        "/api/provider", "v2.provider.list", "The Location's catalog providers",
        answer=_OBJECT, query=("location[directory]",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def provider_list_v2() -> Response:
        directory, where = await located()
        catalog, sources, _ = await catalog_of(directory)
        data = [
            provider_v2_json(provider, connected=sources[pid] is not None)
            for pid, provider in sorted(catalog.providers.items())
        ]
        return _json({"location": where, "data": data})

    @table.get(
        "/api/provider/{providerID}", "v2.provider.get", "One catalog provider", answer=_OBJECT,
        query=("location[directory]",), errors=("InvalidRequestError", "ProviderNotFoundError"),
    )  # fmt: skip
    async def provider_get_v2(provider_id: str) -> Response:
        directory, where = await located()
        catalog, sources, _ = await catalog_of(directory)
        provider = catalog.providers.get(provider_id)
        if provider is None:
            raise GatewayError(
                "ProviderNotFoundError", f"Provider not found: {provider_id}", status=404,
                providerID=provider_id,
            )  # fmt: skip
        data = provider_v2_json(provider, connected=sources[provider_id] is not None)
        return _json({"location": where, "data": data})

    @table.get(
        "/api/model", "v2.model.list", "The Location's catalog models", answer=_OBJECT,
        query=("location[directory]",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def model_list_v2() -> Response:
        directory, where = await located()
        catalog, sources, _ = await catalog_of(directory)
        data = [
            redact(model_v2_json(model, enabled=sources[pid] is not None))
            for pid, provider in sorted(catalog.providers.items())
            for _, model in sorted(provider.models.items())
        ]
        return _json({"location": where, "data": data})


_NO_PROVIDER: Final = llm_package.CatalogProvider(id="", name="", npm="")


def _source(
    provider: llm_package.CatalogProvider, configured: set[str], stored: Mapping[str, Any],
    env: Mapping[str, str],
) -> str | None:  # fmt: skip
    """Where the provider's credential comes from (OpenCode's ``Provider.source``), or
    None when it has none: ``config`` for a configured key or a configured provider that
    needs none, ``api`` for the credential store, ``env`` for a variable."""
    if provider.id in configured and (provider.options.get("apiKey") or not provider.env):
        return "config"
    if provider.id in stored:
        return "api"
    if any(env.get(name) for name in provider.env):
        return "env"
    return None
