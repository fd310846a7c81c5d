"""The model providers' credentials ``kittiwake auth login`` stored in a data dir: what
ACP's ``logout`` forgets when the agent holds that data dir itself."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runtime.llm import Catalog, CredentialStore, providers_with_credentials

__all__ = ["StoredCredentials"]


class StoredCredentials:
    """The credentials stored in *data_dir* (``auth.json``), for the providers of *catalog*
    (``None``: no catalog was read) with the environment *env*."""

    def __init__(self, data_dir: Path, catalog: Catalog | None, env: Mapping[str, str]) -> None:
        self._store = CredentialStore(data_dir)
        self._catalog = catalog
        self._env = env

    def forget(self) -> bool:
        """Remove every stored credential (as ``kittiwake auth logout`` does, one provider
        at a time; each write is whole and atomic); whether a provider still has
        credentials (its environment variable, a configured ``apiKey``). Blocking file I/O:
        run it in a worker thread.

        Raises:
            AuthError: the store is malformed (nothing is removed).
        """
        for provider_id in list(self._store.load()):
            self._store.remove(provider_id)
        if self._catalog is None:
            return False
        return bool(providers_with_credentials(self._catalog, self._env, ()))
