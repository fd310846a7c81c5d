"""Finding a Location's plugins: entry points, files and the configuration's ``plugin`` key.

Blocking (imports run the plugins' module code): the Location's configuration read runs it
in a worker thread. Nothing here calls a plugin; the host does that.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final, Literal, TypeAlias

import msgspec

from runtime.config import global_config_dir
from runtime.tools import import_file

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_DIRS",
    "PluginCandidate",
    "PluginDiscovery",
    "PluginSource",
    "discover_plugins",
    "parse_plugin_entry",
]

ENTRY_POINT_GROUP: Final = "kittiwake.plugins"
PLUGIN_DIRS: Final = ("plugins", "plugin")
"""Folders of plugin files, in ``.kittiwake/`` and in the global configuration folder."""
PluginSource: TypeAlias = Literal["embedded", "entrypoint", "config", "file"]
_VERSION: Final = re.compile(r"^(@?[^@]+)@[^@/]+$")
_FILE_CACHE: dict[str, tuple[tuple[int, int], ModuleType]] = {}
"""Plugin files imported, by absolute path, with the (mtime, size) they were imported at:
an unchanged file is not imported again when the configuration is read again."""


class PluginCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin found: its name, where it came from, the imported object (a module, or a
    callable making the plugin), its options, or why it could not be imported."""

    name: str
    source: PluginSource
    origin: str
    target: Any = None
    options: dict[str, Any] = {}
    error: str | None = None

    @property
    def key(self) -> tuple[Any, bytes]:
        """What makes two candidates the same plugin: the object, and the options."""
        identity: Any = id(self.target) if self.error is None else self.origin
        return identity, msgspec.json.encode(self.options, order="sorted")


class PluginDiscovery(msgspec.Struct, frozen=True, kw_only=True):
    """The candidates in load order (each object once), and every path looked at (a
    change to one may change the result)."""

    candidates: list[PluginCandidate] = []
    looked_at: list[str] = []


def parse_plugin_entry(entry: Any) -> tuple[str, dict[str, Any]]:
    """One ``plugin`` entry: ``"spec"`` or ``["spec", {options}]`` (OpenCode's forms).

    Raises:
        ValueError: any other shape.
    """
    if isinstance(entry, str) and entry:
        return entry, {}
    if (
        isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str)
        and entry[0] and isinstance(entry[1], dict)
    ):  # fmt: skip
        return entry[0], dict(entry[1])
    raise ValueError(f"a plugin entry is a name or [name, options], got {entry!r}")


def discover_plugins(
    directory: str, *, env: Mapping[str, str] | None, entries: Sequence[Any] = (),
    entries_origin: str | None = None, embedded: Sequence[Any] = (),
) -> PluginDiscovery:  # fmt: skip
    """The Location *directory*'s plugins, in load order: *embedded* objects (given by the
    program embedding the runtime), then, when *env* is given (configuration is read),
    installed packages' ``kittiwake.plugins`` entry points and the configuration's
    ``plugin`` *entries* (files relative to *entries_origin*'s folder, else *directory*),
    then files in the global configuration folder's ``plugins/``, then the Location's
    ``.kittiwake/plugins/*.py``. An object found twice loads once, with the options of
    its last entry that has some. Blocking."""
    found: list[PluginCandidate] = []
    looked: list[str] = []
    for index, target in enumerate(embedded):
        name = getattr(target, "name", None) or getattr(target, "__name__", f"embedded-{index}")
        found.append(PluginCandidate(name=str(name), source="embedded", origin="embedded",
                                     target=target))  # fmt: skip
    if env is not None:
        found.extend(_entry_points())
        base = (
            os.path.dirname(entries_origin)
            if entries_origin and os.path.isabs(entries_origin)
            else directory
        )
        for entry in entries:
            found.extend(_config_entry(entry, base, env))
        found.extend(_folder(global_config_dir(env), looked))
    found.extend(_folder(os.path.join(directory, ".kittiwake"), looked))
    return PluginDiscovery(candidates=_once(found), looked_at=looked)


def _once(found: list[PluginCandidate]) -> list[PluginCandidate]:
    """Each object once, at its first place, with the options of its last entry with some."""
    first: dict[Any, int] = {}
    out: list[PluginCandidate] = []
    for candidate in found:
        identity = candidate.key[0]
        if identity not in first:
            first[identity] = len(out)
            out.append(candidate)
        elif candidate.options:
            at = first[identity]
            out[at] = msgspec.structs.replace(out[at], options=candidate.options)
    return out


def _entry_points() -> list[PluginCandidate]:
    points = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    return [_load_entry_point(point, {}) for point in points]


def _load_entry_point(point: Any, options: dict[str, Any]) -> PluginCandidate:
    dist = getattr(point, "dist", None)
    origin = f"{dist.name if dist is not None else '?'}: {point.value}"
    try:
        target = point.load()
    except Exception as exc:  # any import-time error of the plugin's code
        return PluginCandidate(name=point.name, source="entrypoint", origin=origin,
                               options=options, error=_describe(exc))  # fmt: skip
    return PluginCandidate(name=point.name, source="entrypoint", origin=origin, target=target,
                           options=options)  # fmt: skip


def _config_entry(entry: Any, base: str, env: Mapping[str, str]) -> list[PluginCandidate]:
    try:
        spec, options = parse_plugin_entry(entry)
    except ValueError as exc:
        return [PluginCandidate(name=str(entry), source="config", origin="plugin", error=str(exc))]
    if _is_path(spec):
        path = _path(spec, base, env)
        name = os.path.splitext(os.path.basename(path))[0]
        return [_file_candidate(path, name, "config", options)]
    requirement = _VERSION.sub(r"\1", spec)  # OpenCode's "name@version"
    points = _distribution_points(requirement)
    if points:
        return [
            msgspec.structs.replace(_load_entry_point(p, options), source="config") for p in points
        ]
    module, _, attribute = requirement.partition(":")
    try:
        target: Any = importlib.import_module(module.replace("-", "_"))
        for part in filter(None, attribute.split(".")):
            target = getattr(target, part)
    except Exception as exc:  # not installed, or its code failed
        error = (
            f"{requirement}: no installed distribution has a {ENTRY_POINT_GROUP} entry point and "
            f"no module of that name imports ({_describe(exc)}); install it with "
            f"`kittiwake plugin add {requirement}`"
        )
        return [PluginCandidate(name=requirement, source="config", origin=spec, error=error)]
    return [PluginCandidate(name=requirement, source="config", origin=spec, target=target,
                            options=options)]  # fmt: skip


def _distribution_points(requirement: str) -> list[Any]:
    try:
        dist = importlib.metadata.distribution(requirement)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return []
    return sorted(
        (p for p in dist.entry_points if p.group == ENTRY_POINT_GROUP), key=lambda p: p.name
    )


def _is_path(spec: str) -> bool:
    return spec.startswith(("file://", "./", "../", "/", "~")) or spec.endswith(".py")


def _path(spec: str, base: str, env: Mapping[str, str]) -> str:
    path = spec.removeprefix("file://")
    if path.startswith("~"):
        path = (env.get("HOME") or os.path.expanduser("~")) + path[1:]
    return os.path.normpath(os.path.join(base, path))


def _folder(root: str, looked: list[str]) -> list[PluginCandidate]:
    found: list[PluginCandidate] = []
    for folder in (os.path.join(root, name) for name in PLUGIN_DIRS):
        looked.append(folder)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            looked.append(path)
            found.append(_file_candidate(path, name.removesuffix(".py"), "file", {}))
    return found


def _file_candidate(
    path: str, name: str, source: PluginSource, options: dict[str, Any]
) -> PluginCandidate:
    try:
        status = os.stat(path)
        stamp = (status.st_mtime_ns, status.st_size)
        cached = _FILE_CACHE.get(path)
        if cached is not None and cached[0] == stamp:
            module = cached[1]
        else:
            module = import_file(path, prefix="kittiwake_plugin")
            _FILE_CACHE[path] = (stamp, module)
    except Exception as exc:  # a missing file, or an import-time error of its code
        return PluginCandidate(name=name, source=source, origin=path, options=options,
                               error=_describe(exc))  # fmt: skip
    return PluginCandidate(name=name, source=source, origin=path, target=module,
                           options=options)  # fmt: skip


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
