"""``kittiwake acp``: the command's set-up around ``gateway.acp`` (its room): the protocol's
streams taken first, then the data dir held and a runtime opened on it as ``serve`` does."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from gateway._datadir import CliError, check_free, default_data_dir
from gateway.cli._provider import Provider, configured_provider, load_config_warned
from gateway.cli._stats import telemetry_options
from runtime import ModelRef, open_runtime
from runtime import llm as llm_package

__all__ = ["acp", "provider_models"]


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


def _enter(cwd: str | None) -> Path:
    """Work in *cwd* (default: the current directory); raise ``CliError`` unless it is one."""
    directory = Path(cwd or os.getcwd()).resolve()
    if not directory.is_dir():
        raise CliError(f"--cwd {directory}: not a directory", 2)
    os.chdir(directory)
    return directory


async def acp(args: argparse.Namespace) -> int:
    """Serve ACP on standard input and output until the client closes them."""
    from gateway.acp import AgentOptions, EmbeddedBackend, protocol_streams, serve_acp

    with protocol_streams() as (receive, send):
        if args.attach:
            raise CliError("acp --attach is not available yet: run acp without it", 2)
        directory = _enter(args.cwd)
        data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
        check_free(data_dir, "acp")
        config = load_config_warned(str(directory))
        provider = await configured_provider(data_dir, sys.stderr, config)
        options: dict[str, Any] = provider.options() if provider is not None else {}
        options["telemetry"] = telemetry_options(config.config.telemetry)
        try:
            async with open_runtime(
                data_dir=data_dir, llm=provider.client if provider else None, **options
            ) as rt:
                backend = EmbeddedBackend(rt, models=provider_models(provider, data_dir))
                ready = provider is not None and provider.client is not None
                agent = AgentOptions(version=_version(), provider_ready=ready)
                await serve_acp(backend, agent, receive, send)
        finally:
            if provider is not None:
                await provider.clients.aclose()
    return 0
