"""``kittiwake models``, ``auth`` and ``config``: models, their credentials, configuration.

``models`` and ``auth`` read the data dir's model catalog (the models.dev cache, else the
bundled snapshot, extended by the configuration) and its credential store (``<data
dir>/auth.json``, mode 0600); none opens the event store, so they work while a server holds
the data dir (``auth login`` asks the Location's plugins for login methods over the
runtime's routes: the server's then, else a runtime of its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import msgspec

from runtime import llm as llm_package
from runtime.config import LoadedConfig, render_path

__all__ = [
    "REDACTED",
    "SetupError",
    "auth_list",
    "auth_login",
    "auth_logout",
    "configured_model_problem",
    "list_models",
    "read_key",
    "show_config",
]

_COPILOT: Final = "github-copilot"
_DEVICE_WAIT: Final = 900.0  # seconds a device login waits for the user to authorise


class SetupError(Exception):
    """A ``models`` or ``auth`` command that cannot go on; the message is its one line."""


def _store(data_dir: Path) -> tuple[llm_package.CredentialStore, dict[str, object]]:
    store = llm_package.CredentialStore(data_dir)
    try:
        return store, dict(store.load())
    except llm_package.AuthError as exc:
        raise SetupError(f"{exc}; fix or remove it") from None


async def list_models(
    data_dir: Path, provider_id: str | None, env: Mapping[str, str], out: TextIO, *,
    config: LoadedConfig,
) -> int:  # fmt: skip
    """Print the current models of the catalog extended by *config*, ``✓`` before those
    whose provider is usable (it has credentials, or needs none) and ``(default)`` after the
    model a new session would use.

    Raises:
        SetupError: unknown provider, or a malformed credential store.
    """
    catalog = await llm_package.load_catalog(
        cache_path=data_dir / "models-dev.json", config=config.data
    )
    _, stored = _store(data_dir)
    keyed = {
        p.id
        for p in llm_package.usable_providers(
            catalog, llm_package.providers_with_credentials(catalog, env, stored)
        )
    }
    wanted = env.get("KITTIWAKE_MODEL") or config.config.model
    if provider_id is not None and provider_id not in catalog.providers:
        raise SetupError(f"unknown provider {provider_id!r}; `kittiwake models` lists them")
    try:
        default = llm_package.resolve_model(catalog, keyed, wanted)
    except llm_package.CatalogError:
        default = None
    rows = [
        m
        for m in catalog.models()
        if (provider_id is None or m.provider_id == provider_id) and m.status != "deprecated"
    ]
    width = max((len(m.provider_id) + len(m.id) + 1 for m in rows), default=0)
    for model in rows:
        ref = f"{model.provider_id}/{model.id}"
        mark = "✓" if model.provider_id in keyed else " "
        chosen = default is not None and (default.provider_id, default.model_id) == (
            model.provider_id,
            model.id,
        )
        tail = "  (default)" if chosen else ""
        out.write(f"{mark} {ref:<{width}}  {model.name}{tail}\n")
    usable = f"{len(keyed)} of {len(catalog.providers)}"
    out.write(f"✓: the provider has credentials, or needs none ({usable})\n")
    return 0


def auth_list(
    data_dir: Path, env: Mapping[str, str], catalog: llm_package.Catalog, out: TextIO
) -> int:
    """Print the stored credentials (provider and kind, never the secret), then the providers
    whose variables are set in the environment."""
    store, stored = _store(data_dir)
    out.write(f"{store.path}\n")
    for pid, credential in sorted(stored.items()):
        kind = "oauth" if isinstance(credential, llm_package.OAuthCredential) else "api key"
        out.write(f"  {pid:<24} {kind}\n")
    if not stored:
        out.write("  (none)\n")
    found = [
        (p.id, name)
        for p in sorted(catalog.providers.values(), key=lambda p: p.id)
        for name in p.env
        if env.get(name)
    ]
    if found:
        out.write("environment\n")
        for pid, name in found:
            out.write(f"  {pid:<24} {name}\n")
    return 0


def auth_logout(data_dir: Path, provider_id: str, out: TextIO) -> int:
    """Forget *provider_id*'s stored credential.

    Raises:
        SetupError: none is stored, or the store is malformed.
    """
    store, stored = _store(data_dir)
    if provider_id not in stored:
        raise SetupError(f"no stored credential for {provider_id!r} in {store.path}")
    store.remove(provider_id)
    out.write(f"kittiwake: removed the credential of {provider_id}\n")
    return 0


async def auth_login(
    data_dir: Path, provider_id: str, catalog: llm_package.Catalog, *,
    enterprise_url: str | None, stdin: TextIO, err: TextIO,
    plugins: Callable[[llm_package.CredentialStore], Awaitable[bool]] | None = None,
) -> int:  # fmt: skip
    """Store a credential for *provider_id*: through a login method the Location's plugins
    offer for it (*plugins*: True when one logged in), else GitHub Copilot by its device
    login, every other provider by an API key read from the terminal (without echo) or from
    piped standard input.

    Cancellation during a login stores nothing.

    Raises:
        SetupError: an empty key, a failed device login, or a malformed store.
    """
    store, _ = _store(data_dir)
    if plugins is not None and await plugins(store):
        err.write(f"kittiwake: stored the credential of {provider_id} in {store.path}\n")
        return 0
    if provider_id not in catalog.providers:
        err.write(f"kittiwake: note: {provider_id} is not in the model catalog\n")
    if provider_id == _COPILOT:
        credential: llm_package.Credential = await _copilot_login(enterprise_url, err)
    else:
        credential = llm_package.ApiKeyCredential(key=read_key(provider_id, stdin))
    store.set(provider_id, credential)
    err.write(f"kittiwake: stored the credential of {provider_id} in {store.path}\n")
    return 0


def read_key(provider_id: str, stdin: TextIO) -> str:
    """An API key for *provider_id*: typed without echo, or a line of piped input.

    Raises:
        SetupError: none given.
    """
    if stdin.isatty():
        import getpass  # only here: a terminal login

        key = getpass.getpass(f"API key for {provider_id}: ")
    else:
        key = stdin.readline()
    key = key.strip()
    if not key:
        raise SetupError("no API key given (type it, or pipe it on standard input)")
    return key


async def _copilot_login(enterprise_url: str | None, err: TextIO) -> llm_package.OAuthCredential:
    github = (enterprise_url or "https://github.com").rstrip("/")
    http = llm_package.provider_http_client()

    async def show(code: llm_package.DeviceCode) -> None:
        err.write(f"kittiwake: open {code.verification_uri} and enter the code {code.user_code}\n")
        err.flush()

    try:
        return await llm_package.copilot_device_login(
            http, on_user_code=show, max_wait=_DEVICE_WAIT, github_url=github
        )
    except llm_package.AuthError as exc:
        raise SetupError(f"GitHub device login failed: {exc}") from None
    finally:
        await http.aclose()


_SECRET_KEYS: Final = frozenset({"apiKey", "token", "password"})
_SECRET_SECTIONS: Final = frozenset({"headers", "environment"})
REDACTED: Final = "<redacted>"


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Leaf values the way ``merge_documents`` counts them (a list or an empty object is one)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
    else:
        yield path, value


def _secret(path: tuple[str, ...]) -> bool:
    return bool(path) and (path[-1] in _SECRET_KEYS or any(p in _SECRET_SECTIONS for p in path))


def configured_model_problem(loaded: LoadedConfig, error: llm_package.CatalogError) -> str:
    """*error* about the configured ``model`` as one line naming the source that set it."""
    return f"{loaded.origins.get('model', 'the configuration')}: model: {error}"


def show_config(loaded: LoadedConfig, out: TextIO, *, problems: Sequence[str] = ()) -> int:
    """Print the effective configuration: the sources read (lowest precedence first), every
    key with its value and the source it came from (API keys and header values redacted),
    then the diagnostics (keys that were ignored, then *problems*: keys that cannot be
    used, such as an unknown ``model``)."""
    out.write("sources (lowest precedence first):\n")
    for source in loaded.sources:
        out.write(f"  {source}\n")
    if not loaded.sources:
        out.write("  (none)\n")
    out.write("keys:\n")
    for path, value in _leaves(loaded.data, ()):
        key = render_path(path)
        shown = REDACTED if _secret(path) else msgspec.json.encode(value).decode()
        out.write(f"  {loaded.origins.get(key, '?')}\t{key}={shown}\n")
    if not loaded.data:
        out.write("  (none)\n")
    lines = [*map(str, loaded.diagnostics), *problems]
    if lines:
        out.write("diagnostics:\n")
        for line in lines:
            out.write(f"  {line}\n")
    return 0
