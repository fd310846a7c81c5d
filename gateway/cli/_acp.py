"""``kittiwake acp``: the command's set-up around ``gateway.acp`` (its room): the protocol's
streams taken first, then the server to attach to, else the data dir held and a runtime
opened on it as ``serve`` does, and served on loopback for the processes that come next."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import trio

from gateway._datadir import (
    CliError,
    default_data_dir,
    forget_serving,
    record_serving,
    server_headers,
    server_to_reuse,
)
from gateway.cli._provider import Provider, configured_provider, load_config_warned
from gateway.cli._stats import telemetry_options
from runtime import ModelRef, open_runtime
from runtime import llm as llm_package

__all__ = ["acp", "enter_cwd", "provider_models", "serve_beside"]


def _version() -> str:
    try:
        return version("kittiwake")
    except PackageNotFoundError:
        return "unknown"


def provider_models(provider: Provider | None, data_dir: Path) -> list[Any]:
    """The models of the catalog's providers with credentials (``gateway.acp.ModelChoice``),
    by provider and model id; deprecated ones left out."""
    from gateway.acp import ModelChoice

    if provider is None:
        return []
    catalog: llm_package.Catalog = provider.catalog
    try:
        stored = llm_package.CredentialStore(data_dir).load()
    except llm_package.AuthError:
        stored = {}
    credentialed = llm_package.providers_with_credentials(catalog, os.environ, stored)
    return [
        ModelChoice(
            ref=ModelRef(id=model.id, provider_id=pid),
            name=f"{entry.name}: {model.name}",
            context=model.limit.context or None,
        )  # fmt: skip
        for pid, entry in sorted(catalog.providers.items())
        if pid in credentialed
        for _, model in sorted(entry.models.items())
        if model.status != "deprecated"
    ]


def enter_cwd(cwd: str | None) -> Path:
    """Work in *cwd* (default: the current directory); raise ``CliError`` unless it is one."""
    directory = Path(cwd or os.getcwd()).resolve()
    if not directory.is_dir():
        raise CliError(f"--cwd {directory}: not a directory", 2)
    os.chdir(directory)
    return directory


async def acp(args: argparse.Namespace) -> int:
    """Serve ACP on standard input and output until the client closes them: over a runtime
    opened here, or the server ``--attach`` names (else the one holding the data dir)."""
    from gateway.acp import (
        AcpAgent,
        AgentOptions,
        Connection,
        EmbeddedBackend,
        StoredCredentials,
        protocol_streams,
    )

    with protocol_streams() as (receive, send):
        directory = enter_cwd(args.cwd)
        data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
        url = server_to_reuse(args.attach, data_dir, "acp")
        if url is not None:
            if not args.attach:
                print(
                    f"kittiwake: attaching to the kittiwake serve on {url} that holds {data_dir}",
                    file=sys.stderr, flush=True,
                )  # fmt: skip
            await _attached(url, receive, send)
            return 0
        config = load_config_warned(str(directory))
        conn = Connection(receive, send)
        agent = AcpAgent(conn, None, AgentOptions(version=_version(), signs_out=True))
        loaded, done = trio.Event(), trio.Event()
        provider: Provider | None = None

        async def load_gateway() -> None:  # as serve does: the web framework's import
            await trio.to_thread.run_sync(partial(import_module, "gateway._gateway"))
            loaded.set()

        async def run_runtime() -> None:
            """Open the runtime, give the agent its backend, keep it open until the
            client is gone; a failure to open ends the command with one line."""
            nonlocal provider
            provider = await configured_provider(data_dir, sys.stderr, config)
            options: dict[str, Any] = provider.options() if provider is not None else {}
            options["telemetry"] = telemetry_options(config.config.telemetry)
            async with open_runtime(
                data_dir=data_dir, llm=provider.client if provider else None, **options
            ) as rt:
                backend = EmbeddedBackend(rt, models=provider_models(provider, data_dir))
                ready = provider is not None and provider.client is not None
                catalog = provider.catalog if provider is not None else None
                credentials = StoredCredentials(data_dir, catalog, os.environ)
                agent.attach(backend, provider_ready=ready, credentials=credentials)
                async with trio.open_nursery() as beside:
                    beside.start_soon(serve_beside, rt, data_dir, directory, loaded)
                    await done.wait()
                    beside.cancel_scope.cancel()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(load_gateway)
                nursery.start_soon(run_runtime)
                await agent.serve()  # initialize is answered before the runtime is open
                done.set()
        finally:
            if provider is not None:
                await provider.clients.aclose()
    return 0


async def serve_beside(rt: Any, data_dir: Path, directory: Path, loaded: trio.Event) -> None:
    """Serve *rt* over HTTP on a free loopback port until cancelled, its URL recorded in the
    data dir as ``serve`` records it, so that another ``kittiwake acp`` (an editor's second
    window), ``run`` or ``tui`` drives the same runtime instead of finding the data dir
    taken. ``KITTIWAKE_SERVER_PASSWORD`` is its password, as for ``serve``. It starts once
    the web framework is imported (*loaded*), beside the protocol, which does not wait."""
    await loaded.wait()
    from gateway._gateway import serve

    password = os.environ.get("KITTIWAKE_SERVER_PASSWORD") or None
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(serve, rt, "127.0.0.1", 0, password=password, directory=directory)
        )
        record_serving(data_dir, server.url)
        try:
            await trio.sleep_forever()
        finally:
            forget_serving(data_dir)
            server.stop()


async def _attached(url: str, receive: Any, send: Any) -> None:
    """Serve ACP over the server at *url* (``KITTIWAKE_SERVER_TOKEN``, else
    ``KITTIWAKE_SERVER_PASSWORD``, its credentials: ``server_headers``).

    Raises ``CliError`` (exit 2) when it does not answer ``GET /api/health``.
    """
    import httpx

    from gateway.acp import AgentOptions, AttachedBackend, serve_acp

    headers = server_headers()
    timeout = httpx.Timeout(30.0, read=None)  # /wait lasts as long as the run
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout) as client:
        try:
            health = await client.get("/api/health")
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the server at {url}: {exc}", 2) from None
        if health.status_code != 200:
            raise CliError(f"{url}/api/health answered {health.status_code}", 2)
        backend = AttachedBackend(client, authorization=headers.get("Authorization"))
        await serve_acp(backend, AgentOptions(version=_version()), receive, send)
