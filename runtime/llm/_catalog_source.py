"""Where catalog data comes from: a cache file, models.dev, or the bundled snapshot."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ._catalog import Catalog
from ._transport import close_unfinished

if TYPE_CHECKING:
    import httpx

__all__ = ["BUNDLED_SNAPSHOT", "MODELS_DEV_URL", "load_catalog", "load_models_dev"]

MODELS_DEV_URL = "https://models.dev/api.json"
BUNDLED_SNAPSHOT = Path(__file__).with_name("_data") / "models-dev-snapshot.json"


async def load_models_dev(
    *,
    cache_path: Path,
    client: httpx.AsyncClient | None,
    allow_fetch: bool,
    max_age: float,
    fetch_timeout: float,
    url: str = MODELS_DEV_URL,
    max_bytes: int = 64 * 1024 * 1024,
    now: Callable[[], float] = time.time,
) -> tuple[dict[str, Any], str]:
    """Return (models.dev document, source) where source is ``cache``, ``network``,
    ``stale-cache`` or ``bundled``.

    A cache younger than *max_age* seconds is used as is. Otherwise, when
    *allow_fetch* and a *client* are given, the document is fetched (bounded by
    *fetch_timeout* and *max_bytes*) and written atomically to *cache_path*. Any
    fetch failure falls back to a stale cache, then to the bundled snapshot.
    Cancellation propagates; a partially written cache file is never left behind.
    """
    cached, mtime = await trio.to_thread.run_sync(_read_json, cache_path)
    if cached is not None and now() - mtime < max_age:
        return cached, "cache"
    if allow_fetch and client is not None:
        fetched = await _fetch(client, url, fetch_timeout, max_bytes)
        if fetched is not None:
            await trio.to_thread.run_sync(_write_atomic, cache_path, fetched[1])
            return fetched[0], "network"
    if cached is not None:
        return cached, "stale-cache"
    bundled, _ = await trio.to_thread.run_sync(_read_json, BUNDLED_SNAPSHOT)
    return bundled or {}, "bundled"


async def load_catalog(
    *,
    cache_path: Path,
    client: httpx.AsyncClient | None = None,
    allow_fetch: bool = False,
    max_age: float = 300.0,
    fetch_timeout: float = 10.0,
    config: dict[str, Any] | None = None,
    url: str = MODELS_DEV_URL,
) -> Catalog:
    """Load models.dev data (see ``load_models_dev``) and merge *config* into a Catalog."""
    data, _ = await load_models_dev(
        cache_path=cache_path,
        client=client,
        allow_fetch=allow_fetch,
        max_age=max_age,
        fetch_timeout=fetch_timeout,
        url=url,
    )
    catalog = Catalog.from_models_dev(data)
    return catalog.with_config(config) if config else catalog


async def _fetch(
    client: httpx.AsyncClient, url: str, fetch_timeout: float, max_bytes: int
) -> tuple[dict[str, Any], bytes] | None:
    import httpx

    with trio.move_on_after(fetch_timeout):
        try:
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    return None
                body = bytearray()
                chunks = response.aiter_bytes()
                while (chunk := await anext(chunks, None)) is not None:
                    body.extend(chunk)
                    if len(body) > max_bytes:
                        await close_unfinished(response, chunks)
                        return None
            data = msgspec.json.decode(bytes(body))
        except (httpx.HTTPError, msgspec.DecodeError):
            return None
        return (data, bytes(body)) if isinstance(data, dict) else None
    return None


def _read_json(path: Path) -> tuple[dict[str, Any] | None, float]:
    try:
        data = msgspec.json.decode(path.read_bytes())
        mtime = path.stat().st_mtime
    except (OSError, msgspec.DecodeError):
        return None, 0.0
    return (data, mtime) if isinstance(data, dict) else (None, 0.0)


def _write_atomic(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".models-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
