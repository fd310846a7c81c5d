"""The provider a ``kittiwake`` command runs with: the model catalog, the credentials, the
configured or pinned model, and what ``open_runtime`` is given of them."""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from gateway._datadir import CliError
from gateway.cli._setup import configured_model_problem
from runtime import ModelRef
from runtime import llm as llm_package
from runtime.config import ConfigError, LoadedConfig, load_config

__all__ = ["Provider", "configured_provider", "load_config_warned"]

_FEATURED: Final = ("anthropic", "openai", "google", "openrouter", "github-copilot")


class Provider(msgspec.Struct, frozen=True):
    """The provider clients of one command: ``client`` (None without a usable provider),
    the default ``model``, the clients per configuration and the catalog they route by."""

    client: Any
    model: ModelRef | None
    clients: Any  # actors.ProviderClients
    configuration: Any  # actors.Configuration
    catalog: Any

    def options(self) -> dict[str, Any]:
        """``open_runtime`` options: the default model, which model writes titles, and
        how Locations read their configuration."""
        options: dict[str, Any] = {
            "title_model": partial(_small_model, self.catalog),
            "configuration": self.configuration,
        }
        if self.model is not None:
            options["default_model"] = self.model
        return options


def _small_model(catalog: llm_package.Catalog, model: ModelRef) -> ModelRef | None:
    """The catalog's small model of *model*'s provider; None (no title) for a provider
    without one, such as an unpriced local server whose first answer a title request
    would compete with."""
    small = llm_package.choose_small_model(catalog, model.provider_id)
    return None if small is None else ModelRef(id=small.model_id, provider_id=small.provider_id)


def load_config_warned(directory: str) -> LoadedConfig:
    """The configuration of *directory*, its diagnostics printed as warnings.

    Raises:
        CliError: a source that cannot be used (exit status 2).
    """
    try:
        loaded = load_config(directory, os.environ)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None
    for diagnostic in loaded.diagnostics:
        print(f"kittiwake: warning: {diagnostic}", file=sys.stderr)
    return loaded


async def configured_provider(
    data_dir: Path, out: Any, config: LoadedConfig | None = None, wanted: str | None = None,
    *, max_requests: int | None = None,
) -> Provider | None:  # fmt: skip
    """Provider clients over models.dev plus *config*'s providers, with the model
    *wanted* (``provider/model``), else ``KITTIWAKE_MODEL``, else the configured ``model``,
    else the default model of the first usable provider (``llm.resolve_model``); None when
    the catalog cannot be loaded. Without a usable provider, explains what was looked for
    (``client`` is None then). *max_requests* bounds the provider requests in flight at
    once (``ProviderClients``).

    Raises:
        CatalogError: the model asked for (or configured: the message names its file) is
            unknown, or its provider has no credentials.
        CliError: the credential store is malformed.
    """

    from actors import Configuration, ProviderClients  # serving imports actors anyway

    try:
        base = await llm_package.load_catalog(cache_path=data_dir / "models-dev.json")
    except (llm_package.CatalogError, OSError) as exc:
        print(f"kittiwake: could not load the model catalog ({exc}); no provider", file=out)
        return None
    data = config.data if config is not None else {}
    catalog = base.with_config(data) if data else base
    store = llm_package.CredentialStore(data_dir)
    try:
        stored = store.load()
    except llm_package.AuthError as exc:
        raise CliError(f"{exc}; fix or remove it") from None
    providers = catalog.providers
    credentialed = llm_package.providers_with_credentials(catalog, os.environ, stored)
    auth = llm_package.Auth(env=dict(os.environ), store=store)
    clients = ProviderClients(base, auth, max_requests=max_requests)
    pinned = wanted or os.environ.get("KITTIWAKE_MODEL")
    ref = llm_package.resolve_model(catalog, credentialed, pinned)
    if not pinned and config is not None and config.config.model:
        try:
            ref = llm_package.resolve_model(catalog, credentialed, config.config.model)
        except llm_package.CatalogError as exc:
            raise llm_package.CatalogError(configured_model_problem(config, exc)) from None
    configuration = Configuration(
        env=os.environ, llm_for=clients,
        pinned_model=_model_ref(ref) if pinned and ref is not None else None,
    )  # fmt: skip
    if ref is not None:
        print(f"kittiwake: using provider {ref.provider_id}, model {ref.model_id}", file=out)
        return Provider(clients(data), _model_ref(ref), clients, configuration, catalog)
    looked = [providers[p] for p in _FEATURED if p in providers] or list(providers.values())[:5]
    print("kittiwake: no LLM provider is configured; prompts will fail until one is.", file=out)
    print("  Looked for credentials of these providers (and every other catalog entry):", file=out)
    for provider in looked:
        names = ", ".join(provider.env) or "(login)"
        print(f"    {provider.id:<16} {names}", file=out)
    print(f"  Set one of those variables, or store a credential in {store.path},", file=out)
    print("  optionally with KITTIWAKE_MODEL=provider/model, and restart.", file=out)
    return Provider(None, None, clients, configuration, catalog)


def _model_ref(ref: llm_package.ModelRef) -> ModelRef:
    return ModelRef(id=ref.model_id, provider_id=ref.provider_id)
