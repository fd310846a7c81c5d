"""Reading configuration sources: the thin shell around ``runtime.config._core``.

Sources, lowest precedence first: the global ``$XDG_CONFIG_HOME/kittiwake/kittiwake.json``
(then ``.jsonc``); the file ``KITTIWAKE_CONFIG`` names; the project's ``kittiwake.jsonc``
then ``kittiwake.json`` files from the git worktree root down to the Location's directory,
then its ``.kittiwake/kittiwake.json(c)`` files the same way; ``KITTIWAKE_CONFIG_CONTENT``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, Literal, TypeVar

import msgspec
import trio

from runtime.config._core import (
    ConfigDiagnostic,
    Document,
    merge_documents,
    parse_document,
    validate_document,
)
from runtime.config._jsonc import ConfigError, parse_jsonc
from runtime.config._schema import Config
from runtime.context import RACY_NS, path_stamp

__all__ = [
    "CONFIG_CONTENT_ENV",
    "CONFIG_ENV",
    "ConfigWatch",
    "LoadedConfig",
    "config_candidates",
    "global_config_dir",
    "global_config_file",
    "load_config",
    "load_global_config",
    "project_config_file",
    "worktree_root",
    "write_config_patch",
]

CONFIG_ENV: Final = "KITTIWAKE_CONFIG"
CONFIG_CONTENT_ENV: Final = "KITTIWAKE_CONFIG_CONTENT"
DISABLE_PROJECT_CONFIG_ENV: Final = "KITTIWAKE_DISABLE_PROJECT_CONFIG"
_GLOBAL_NAMES: Final = ("kittiwake.json", "kittiwake.jsonc")
_PROJECT_NAMES: Final = (
    "kittiwake.jsonc",
    "kittiwake.json",
    os.path.join(".kittiwake", "kittiwake.jsonc"),
    os.path.join(".kittiwake", "kittiwake.json"),
)
SourceKind = Literal["global", "config", "project", "inline"]
T = TypeVar("T")


class LoadedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The effective configuration of one directory.

    Attributes:
        config: the merged configuration, typed.
        data: the same as plain JSON data (what ``GET /config`` shows, before redaction,
            and what the provider catalog is extended with).
        origins: for every leaf key path (``provider.local.options.baseURL``), the source
            it came from: a file path, or ``KITTIWAKE_CONFIG_CONTENT``.
        sources: the sources read, lowest precedence first.
        diagnostics: keys that were ignored, with where they were written.
        looked_at: every path checked, present or not, and every ``{file:}`` read (a
            change to any of them may change the result).
    """

    config: Config
    data: dict[str, Any]
    origins: dict[str, str]
    sources: list[str]
    diagnostics: list[ConfigDiagnostic]
    looked_at: list[str]

    @classmethod
    def empty(cls) -> LoadedConfig:
        """No configuration at all."""
        return cls(config=Config(), data={}, origins={}, sources=[], diagnostics=[], looked_at=[])


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def global_config_dir(env: Mapping[str, str]) -> str:
    """``$XDG_CONFIG_HOME/kittiwake``, else ``~/.config/kittiwake``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(_home(env), ".config")
    return os.path.join(base, "kittiwake")


def global_config_file(env: Mapping[str, str]) -> str:
    """The global file ``PATCH /global/config`` writes: the existing one, else
    ``kittiwake.json``. Blocking (checks the files)."""
    folder = global_config_dir(env)
    return _existing(folder, ("kittiwake.json", "kittiwake.jsonc"))


def project_config_file(directory: str) -> str:
    """The project file ``PATCH /config`` writes for the Location *directory*: its
    ``kittiwake.json`` or ``kittiwake.jsonc`` when one exists, else ``kittiwake.json``."""
    return _existing(directory, ("kittiwake.json", "kittiwake.jsonc"))


def _existing(folder: str, names: tuple[str, ...]) -> str:
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return os.path.join(folder, names[0])


def worktree_root(directory: str) -> str:
    """The nearest ancestor holding ``.git``; the directory itself outside a repository.
    Blocking (checks the folders)."""
    current = directory
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return directory
        current = parent


def config_candidates(
    directory: str | None, env: Mapping[str, str]
) -> list[tuple[SourceKind, str]]:
    """Every file that may hold configuration for *directory*, lowest precedence first,
    present or not (``None``: the global sources only). Blocking (looks for ``.git``)."""
    found: list[tuple[SourceKind, str]] = [
        ("global", os.path.join(global_config_dir(env), name)) for name in _GLOBAL_NAMES
    ]
    if env.get(CONFIG_ENV):
        found.append(("config", os.path.abspath(env[CONFIG_ENV])))
    disabled = env.get(DISABLE_PROJECT_CONFIG_ENV, "").strip().lower() in ("1", "true")
    if directory is not None and not disabled:
        start = os.path.realpath(directory)
        root = worktree_root(start)
        chain = [start]
        while chain[-1] != root and os.path.dirname(chain[-1]) != chain[-1]:
            chain.append(os.path.dirname(chain[-1]))
        for name in _PROJECT_NAMES:
            found.extend(("project", os.path.join(folder, name)) for folder in reversed(chain))
    return found


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def load_config(
    directory: str | None, env: Mapping[str, str] | None = None, *, include_env: bool = True
) -> LoadedConfig:
    """Read, check and merge every configuration source of *directory*. Blocking.

    *env* (default: the process environment) supplies ``KITTIWAKE_CONFIG``,
    ``KITTIWAKE_CONFIG_CONTENT``, ``XDG_CONFIG_HOME``, ``HOME`` and ``{env:}`` values.
    ``directory=None`` reads no project files; ``include_env=False`` also leaves out
    ``KITTIWAKE_CONFIG`` and ``KITTIWAKE_CONFIG_CONTENT`` (the global file alone).

    Raises:
        ConfigError: a source has a syntax error, a wrong type, or a ``{file:}``
            reference that cannot be read; the message names file, line, column and
            key path. ``KITTIWAKE_CONFIG`` naming a missing file is an error too.
    """
    environ: Mapping[str, str] = dict(os.environ) if env is None else env
    if not include_env:
        environ = {k: v for k, v in environ.items() if k not in (CONFIG_ENV, CONFIG_CONTENT_ENV)}
    home = _home(environ)
    looked_at: list[str] = []
    documents: list[Document] = []
    for kind, path in config_candidates(directory, environ):
        looked_at.append(path)
        try:
            text = _read_text(path)
        except FileNotFoundError:
            if kind == "config":
                raise ConfigError(f"{CONFIG_ENV} names a missing file", source=path) from None
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot be read: {exc}", source=path) from None
        documents.append(_document(text, path, os.path.dirname(path), environ, home))
    inline = environ.get(CONFIG_CONTENT_ENV) if include_env else None
    if inline:
        base = directory if directory is not None else os.getcwd()
        documents.append(_document(inline, CONFIG_CONTENT_ENV, base, environ, home))
    for document in documents:
        looked_at.extend(document.references)
    data, origins = merge_documents(documents)
    return LoadedConfig(
        config=msgspec.convert(data, Config), data=data, origins=origins,
        sources=[d.source for d in documents],
        diagnostics=[d for document in documents for d in document.diagnostics],
        looked_at=looked_at,
    )  # fmt: skip


def load_global_config(env: Mapping[str, str] | None = None) -> LoadedConfig:
    """The global file(s) alone (what ``GET /global/config`` shows). Blocking; raises
    ``ConfigError`` as :func:`load_config`."""
    return load_config(None, env, include_env=False)


def _document(text: str, source: str, base: str, env: Mapping[str, str], home: str) -> Document:
    return parse_document(
        text, source=source, env=env, base_dir=base, home=home, read_file=_read_text
    )


def write_config_patch(path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge *patch* into the configuration file at *path* and replace the file
    atomically (a new file in the same folder, then a rename). Blocking.

    The file's own text is merged, ``{env:}`` and ``{file:}`` references unexpanded;
    comments in it are not kept. Returns the file's new content.

    Raises:
        ConfigError: *patch* or the file is not a valid configuration (nothing is
            written then). ``OSError`` when the file cannot be written.
    """
    import tempfile  # only writers need it (about 4 ms to import)

    validate_document(dict(patch), source="request body")
    try:
        current, _ = parse_jsonc(_read_text(path), source=path)
    except FileNotFoundError:
        current = {}
    if not isinstance(current, dict):
        raise ConfigError("a configuration must be a JSON object", source=path)
    merged, _ = merge_documents(
        [Document(source=path, data=current), Document(source="patch", data=dict(patch))]
    )
    validate_document(merged, source=path)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kittiwake-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(msgspec.json.format(msgspec.json.encode(merged), indent=2) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return merged


class ConfigWatch(Generic[T]):
    """Runs a blocking *loader* in a worker thread again only when a path it looked at
    changed (the stamps of :class:`runtime.context.InstructionsWatch`).

    *loader* returns ``(value, paths looked at)``. A loader that raises is run again at
    the next :meth:`load`. Cancellation waits for a running loader to end, then raises.
    With ``threaded=False`` the loader runs on the calling thread instead (for programs
    under an autojump clock, which must not see worker threads).
    """

    __slots__ = ("_loader", "_stamps", "_threaded", "_value", "loads")

    def __init__(self, loader: Callable[[], tuple[T, list[str]]], *, threaded: bool = True) -> None:
        self._loader = loader
        self._threaded = threaded
        self._value: T | None = None
        self._stamps: list[tuple[str, Any]] | None = None
        self.loads = 0

    def current(self) -> T | None:
        """The value of the last successful load, if any (never blocks)."""
        return self._value

    async def load(self) -> T:
        """The loader's value for the files as they are now. Raises what the loader raises."""
        if self._stamps is not None and self._value is not None:
            if all(path_stamp(path) == stamp for path, stamp in self._stamps):
                await trio.lowlevel.checkpoint_if_cancelled()
                return self._value
        if self._threaded:
            value, stamps = await trio.to_thread.run_sync(self._run)
        else:
            await trio.lowlevel.checkpoint()
            value, stamps = self._run()
        self._value, self._stamps = value, stamps
        self.loads += 1
        return value

    def load_now(self) -> T:
        """:meth:`load` on this thread (blocking): for a first load where no await fits."""
        self._value, self._stamps = self._run()
        self.loads += 1
        return self._value

    def _run(self) -> tuple[T, list[tuple[str, Any]] | None]:
        started = time.time_ns()
        value, looked_at = self._loader()
        stamps = [(path, path_stamp(path)) for path in dict.fromkeys(looked_at)]
        settled = started - RACY_NS
        for _, pair in stamps:
            for key in pair:
                if key is not None and max(key[3], key[4]) >= settled:
                    return value, None  # changed too recently to trust: look again next time
        return value, stamps
