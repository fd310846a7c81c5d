"""``kittiwake slack``: the command's set-up around ``gateway.slack`` (its room): the
settings read, then the server to attach to, else the data dir held and a runtime opened on
it as ``serve`` does (and served on loopback beside the bot, so that ``kittiwake tui`` or
``run`` reach the same sessions), and the bot served until interrupted. ``serve --slack``'s
set-up too: the bot over the served runtime, behind the gateway's ``POST /slack/events``."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from gateway._datadir import CliError, default_data_dir, server_headers, server_to_reuse
from gateway.cli._acp import enter_cwd, provider_models, serve_beside
from gateway.cli._provider import Provider, configured_provider, load_config_warned
from gateway.cli._stats import telemetry_options
from runtime import open_runtime

if TYPE_CHECKING:
    from actors import Runtime
    from gateway.http import Room
    from gateway.slack import SlackSettings
    from runtime.config import LoadedConfig

__all__ = ["slack", "slack_room", "slack_settings"]


async def slack(args: argparse.Namespace) -> int:
    """Serve Slack until interrupted: over a runtime opened here, or the server
    ``--attach`` names (else the one holding the data dir)."""
    from gateway.slack import SettingsError, settings_from

    directory = enter_cwd(args.cwd)
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    config = load_config_warned(str(directory))
    try:
        settings = settings_from(config.config.slack, os.environ, str(directory))
    except SettingsError as exc:
        raise CliError(str(exc), 2) from None
    threads = data_dir / "slack" / "threads.json"
    url = server_to_reuse(args.attach, data_dir, "slack")
    if url is not None:
        if not args.attach:
            print(f"kittiwake: attaching to the kittiwake serve on {url} that holds {data_dir}",
                  file=sys.stderr, flush=True)  # fmt: skip
        await _attached(url, settings, threads)
        return 0
    provider = await configured_provider(data_dir, sys.stderr, config)
    try:
        options: dict[str, Any] = provider.options() if provider is not None else {}
        options["telemetry"] = telemetry_options(config.config.telemetry)
        await _embedded(data_dir, directory, provider, options, settings, threads)
    finally:
        if provider is not None:
            await provider.clients.aclose()
    return 0


async def _embedded(
    data_dir: Path, directory: Path, provider: Provider | None, options: dict[str, Any],
    settings: Any, threads: Path,
) -> None:  # fmt: skip
    from gateway.acp import EmbeddedBackend
    from gateway.slack import serve_slack

    loaded = trio.Event()

    async def load_gateway() -> None:  # as serve does: the web framework's import
        await trio.to_thread.run_sync(partial(import_module, "gateway._gateway"))
        loaded.set()

    async with open_runtime(
        data_dir=data_dir, llm=provider.client if provider else None, **options
    ) as rt:
        backend = EmbeddedBackend(rt, models=provider_models(provider, data_dir))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(load_gateway)
            nursery.start_soon(serve_beside, rt, data_dir, directory, loaded)
            await nursery.start(serve_slack, backend, settings, threads)
            print("kittiwake: connected to Slack", file=sys.stderr, flush=True)


async def _attached(url: str, settings: Any, threads: Path) -> None:
    """Serve Slack over the server at *url* (``KITTIWAKE_SERVER_PASSWORD`` its password).

    Raises ``CliError`` (exit 2) when it does not answer ``GET /api/health``.
    """
    import httpx

    from gateway.acp import AttachedBackend
    from gateway.slack import serve_slack

    headers = server_headers()  # KITTIWAKE_SERVER_TOKEN, else KITTIWAKE_SERVER_PASSWORD
    timeout = httpx.Timeout(30.0, read=None)  # /wait lasts as long as the run
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout) as client:
        try:
            health = await client.get("/api/health")
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the server at {url}: {exc}", 2) from None
        if health.status_code != 200:
            raise CliError(f"{url}/api/health answered {health.status_code}", 2)
        backend = AttachedBackend(client, authorization=headers.get("Authorization"))
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_slack, backend, settings, threads)
            print("kittiwake: connected to Slack", file=sys.stderr, flush=True)


def slack_settings(config: LoadedConfig, directory: Path) -> SlackSettings:
    """``serve --slack``'s settings: the bot token and the signing secret (not the app
    token), from *config*'s ``slack`` section or the environment.

    Raises ``CliError`` (exit 2) naming what is missing.
    """
    from gateway.slack import SettingsError, settings_from

    try:
        return settings_from(config.config.slack, os.environ, str(directory), events=True)
    except SettingsError as exc:
        raise CliError(str(exc), 2) from None


async def slack_room(
    rt: Runtime, provider: Provider | None, data_dir: Path, settings: SlackSettings
) -> Room:
    """The room serving Slack's HTTP Events API over *rt* (``POST /slack/events`` and the
    bot while the gateway serves), its thread map in ``<data dir>/slack/threads.json``.

    Raises ``CliError`` (exit 2) when Slack refuses the bot token or is out of reach.
    """
    from gateway.acp import EmbeddedBackend
    from gateway.slack import SettingsError, open_slack_events

    backend = EmbeddedBackend(rt, models=provider_models(provider, data_dir))
    try:
        events = await open_slack_events(backend, settings, data_dir / "slack" / "threads.json")
    except SettingsError as exc:
        raise CliError(str(exc), 2) from None
    return events.room()
