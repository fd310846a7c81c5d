"""Location-scoped filesystem authority.

Every path a tool names resolves relative to the Location. Absolute paths,
``..`` escapes and symlinks leading outside are refused; the one exception is
reading or searching a Managed Tool Output File by its absolute path inside
``<data dir>/tool-output``.
"""

from __future__ import annotations

import os

import msgspec

from runtime.tools._model import ToolEnvironment, ToolError

__all__ = ["ResolvedPath", "is_within", "resolve_path"]


class ResolvedPath(msgspec.Struct, frozen=True, kw_only=True):
    """A path inside authority: the canonical absolute path and its resource identity
    (relative to the Location, or absolute for managed tool output)."""

    absolute: str
    resource: str
    managed: bool = False


def is_within(path: str, root: str) -> bool:
    """Tell whether canonical *path* is *root* or below it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_path(env: ToolEnvironment, path: str, *, allow_managed: bool = False) -> ResolvedPath:
    """Resolve *path* for a tool of the Location *env*.

    Args:
        allow_managed: accept absolute paths inside managed tool-output storage
            (reads and searches only).

    Raises:
        ToolError: the path is absolute (outside managed storage) or escapes
            the Location, lexically or through a symlink.
    """
    if os.path.isabs(path):
        return _resolve_managed(env, path, allow_managed)
    root = os.path.realpath(env.directory)
    lexical = os.path.normpath(os.path.join(root, path or "."))
    if not is_within(lexical, root):
        raise ToolError(f"Path escapes the Location: {path}")
    real = os.path.realpath(lexical)
    if not is_within(real, root):
        raise ToolError(f"Path escapes the Location through a symlink: {path}")
    return ResolvedPath(absolute=real, resource=os.path.relpath(real, root))


def _resolve_managed(env: ToolEnvironment, path: str, allow_managed: bool) -> ResolvedPath:
    managed_root = os.path.realpath(env.tool_output_dir)
    real = os.path.realpath(path)
    if allow_managed and is_within(real, managed_root):
        return ResolvedPath(absolute=real, resource=real, managed=True)
    raise ToolError(
        f"Absolute path refused: {path}; use a path relative to the Location"
        " (absolute paths are allowed only for managed tool output)"
    )
