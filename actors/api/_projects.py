"""``rt.projects``: the projects sessions belong to, registered durably in the store.

A project is a git repository (all its worktrees) or, outside git, a directory: the
server's own with every directory below it, any other its own project. Its id is the repository's root commit (the smallest hash of ``git rev-list --max-parents=0
--all``, as OpenCode does), so every worker of a cluster, whatever its data dir or its
checkout's path, gives the same id to the same repository; a repository without commits
and a directory outside git take the first 16 hex digits of the SHA-256 of the resolved
path (the worktree root's, for git).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import msgspec
import trio

from runtime import InvalidSessionInputError
from storage import GetRecord, ListRecords, PutRecord, RecordRow

if TYPE_CHECKING:
    from actors.store import StorageActor

__all__ = ["PROJECT_KIND", "ProjectInfo", "ProjectPlace", "Projects", "project_place"]

_log = logging.getLogger("kittiwake.projects")
PROJECT_KIND: Final = "project"
"""The kind of the store's ``record`` rows holding projects."""
_GIT_TIMEOUT: Final = 10.0
_KNOWN: Final = 1024


class ProjectInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One registered project.

    Attributes:
        id: the repository's root commit, or a hash of the directory (module docstring).
        worktree: the repository's main worktree (or the directory) as first registered.
        vcs: ``"git"`` for a repository.
        time_created: milliseconds, when it was first registered.
        time_updated: milliseconds, when it was last registered or initialized.
        time_initialized: milliseconds, when ``POST /project/init`` last marked it.
        sandboxes: the repository's other worktrees registered since, oldest first.
    """

    id: str
    worktree: str
    vcs: Literal["git"] | None = None
    time_created: int
    time_updated: int
    time_initialized: int | None = None
    sandboxes: tuple[str, ...] = ()


class ProjectPlace(msgspec.Struct, frozen=True, kw_only=True):
    """Where a directory belongs: its project's id, worktree root and main worktree."""

    id: str
    root: str
    main: str
    vcs: Literal["git"] | None = None


def _path_id(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:16]


def project_place(
    directory: str, *, toplevel: str | None = None, common_dir: str | None = None,
    root_commits: list[str] | None = None,
) -> ProjectPlace:  # fmt: skip
    """The project of *directory* from what git said of it (nothing: not in git).

    *toplevel* is ``git rev-parse --show-toplevel``, *common_dir* the absolute
    ``--git-common-dir`` (its parent is the main worktree when it is named ``.git``),
    *root_commits* the lines of ``git rev-list --max-parents=0 --all``."""
    if toplevel is None:
        return ProjectPlace(id=_path_id(directory), root=directory, main=directory)
    main = toplevel
    if common_dir is not None and Path(common_dir).name == ".git":
        main = str(Path(common_dir).parent)
    roots = sorted(c.strip() for c in root_commits or [] if c.strip())
    project_id = roots[0] if roots else _path_id(main)
    return ProjectPlace(id=project_id, root=toplevel, main=main, vcs="git")


def _locate(directory: str) -> tuple[str, bool]:
    """*directory* resolved, and whether it or a parent holds ``.git`` (a few stats)."""
    resolved = Path(directory).resolve()
    return str(resolved), any((d / ".git").exists() for d in (resolved, *resolved.parents))


def _is_directory(directory: str) -> bool:
    return os.path.isabs(directory) and os.path.isdir(directory)


async def _git(directory: str, *args: str) -> list[str] | None:
    """The output lines of ``git -C directory args``, or None when it fails. Bounded by
    ``_GIT_TIMEOUT``; cancellation kills it (trio's ``run_process``)."""
    command = ["git", "-C", directory, *args]
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    with trio.move_on_after(_GIT_TIMEOUT):
        try:
            done = await trio.run_process(command, capture_stdout=True, capture_stderr=True,
                                          check=False, env=env)  # fmt: skip
        except OSError as exc:  # no git on PATH
            _log.warning("git did not start", extra={"error": str(exc)})
            return None
        if done.returncode != 0:
            return None
        return done.stdout.decode(errors="replace").splitlines()
    _log.warning("git timed out", extra={"directory": directory})
    return None


async def find_place(directory: str) -> ProjectPlace:
    """The project of an absolute, existing *directory* (resolved first), asking git when
    it is inside a repository. Cancellation kills a running git."""
    path, in_git = _locate(directory)
    if not in_git:
        return project_place(path)
    top = await _git(path, "rev-parse", "--show-toplevel", "--path-format=absolute",
                     "--git-common-dir")  # fmt: skip
    if top is None or len(top) < 2:
        return project_place(path)
    roots = await _git(top[0], "rev-list", "--max-parents=0", "--all")
    return project_place(path, toplevel=top[0], common_dir=top[1], root_commits=roots or [])


class Projects:
    """Find, register and list projects. Obtain it as ``rt.projects``.

    Finding a directory's project (``place``, ``id_of``) never touches the store: a
    session's project is what its directory is, whether registered or not. Only
    ``register`` and ``initialize`` write, so reading routes cannot grow the store. The
    project of the last ``_KNOWN`` directories is remembered (which project a directory
    belongs to changes only when its repository's first commit is made, so only a
    repository with commits is remembered; outside git, finding costs a few ``stat``).
    """

    def __init__(self, *, storage: StorageActor, now_ms: Callable[[], int]) -> None:
        self._storage = storage
        self._now = now_ms
        self._places: OrderedDict[str, ProjectPlace] = OrderedDict()
        self._registered: set[tuple[str, str]] = set()
        self._lock = trio.Lock()
        self._home: str | None = None

    def serve_from(self, directory: str) -> None:
        """Make *directory* (resolved; the server's own) the home: a directory below it
        outside git belongs to its project, not to one of its own. Every worker of a
        cluster serves the same directory, so they agree."""
        self._home = str(Path(directory).resolve())
        self._places.clear()

    async def place(self, directory: str) -> ProjectPlace:
        """Where *directory* belongs, without registering it: its repository's project,
        else the home's (``serve_from``) when it is below it, else its own. Cancellation
        kills a running git."""
        found = self._places.get(directory)
        if found is not None:
            return found
        found = await find_place(directory)
        home = self._home
        if found.vcs is None and home is not None and Path(found.root).is_relative_to(home):
            found = project_place(home)  # below the server's own directory, outside git
        if found.vcs is not None and found.id != _path_id(found.main):  # has commits
            self._places[directory] = found
            while len(self._places) > _KNOWN:
                self._places.popitem(last=False)
        return found

    async def id_of(self, directory: str) -> str:
        """The id of *directory*'s project (``place``); reads nothing from the store."""
        return (await self.place(directory)).id

    def describe(self, place: ProjectPlace) -> ProjectInfo:
        """*place* as a project not registered (yet): created now."""
        now = self._now()
        return ProjectInfo(id=place.id, worktree=place.main, vcs=place.vcs, time_created=now,
                           time_updated=now)  # fmt: skip

    async def register(self, directory: str) -> ProjectInfo:
        """The project of *directory*, registered durably first if it is new or *directory*
        is a worktree of it not registered yet (the write is committed before this
        returns; once this process registered it, nothing is read or written again).

        Raises:
            InvalidSessionInputError: *directory* is not an existing absolute directory.
            StorageError: the store failed the read or the write.
        """
        if not _is_directory(directory):
            raise InvalidSessionInputError(
                "location", f"Not an existing absolute directory: {directory}"
            )
        place = await self.place(directory)
        async with self._lock:
            stored = await self.get(place.id)
            if stored is None:
                stored = self.describe(place)
                await self._put(stored)
            elif place.root != stored.worktree and place.root not in stored.sandboxes:
                sandboxes = (*stored.sandboxes, place.root)
                stored = msgspec.structs.replace(
                    stored, sandboxes=sandboxes, time_updated=self._now()
                )
                await self._put(stored)
            self._registered.add((place.id, place.root))
        return stored

    async def registered(self, directory: str) -> None:
        """``register`` *directory*'s project unless this process already did (then it
        costs a cached lookup). Raises as ``register``."""
        place = await self.place(directory)
        if (place.id, place.root) not in self._registered:
            await self.register(directory)

    async def current(self, directory: str) -> ProjectInfo:
        """*directory*'s project as registered, else as ``describe`` (nothing written)."""
        place = await self.place(directory)
        return await self.get(place.id) or self.describe(place)

    async def initialize(self, directory: str) -> ProjectInfo:
        """Register *directory*'s project (``register``) and mark it initialized now."""
        info = await self.register(directory)
        now = self._now()
        info = msgspec.structs.replace(info, time_initialized=now, time_updated=now)
        await self._put(info)
        return info

    async def get(self, project_id: str) -> ProjectInfo | None:
        """The registered project *project_id*, or None."""
        row = await self._storage.read(GetRecord(kind=PROJECT_KIND, id=project_id))
        return None if row is None else msgspec.json.decode(row.data, type=ProjectInfo)

    async def list(self, *, limit: int) -> list[ProjectInfo]:
        """The registered projects, newest first, *limit* at most."""
        rows = await self._storage.read(ListRecords(kind=PROJECT_KIND, limit=limit))
        return [msgspec.json.decode(r.data, type=ProjectInfo) for r in rows]

    async def _put(self, info: ProjectInfo) -> None:
        data = msgspec.json.encode(info).decode()
        row = RecordRow(PROJECT_KIND, info.id, info.time_created, data)
        await self._storage.write(PutRecord(row=row))
