"""The git commands ``kittiwake github run`` runs in the checkout: the pull request's
branch, the files the session changed, a commit and a push."""

from __future__ import annotations

import subprocess
from typing import Final

import trio

__all__ = ["GitError", "changed_files", "checkout_branch", "commit_all", "git", "push"]

_IDENTITY: Final = (
    "-c", "user.name=kittiwake[bot]",
    "-c", "user.email=kittiwake[bot]@users.noreply.github.com",
)  # fmt: skip
_TIMEOUT: Final = 300.0


class GitError(Exception):
    """A git command that failed: the message is the command and what git said."""


async def git(cwd: str, *args: str, seconds: float = _TIMEOUT) -> str:
    """Run ``git *args`` in *cwd*; its standard output. Raises ``GitError`` when it fails
    or takes longer than *seconds* (it is killed then)."""
    with trio.move_on_after(seconds) as scope:
        done = await trio.run_process(
            ["git", *args], cwd=cwd, capture_stdout=True, capture_stderr=True, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    if scope.cancelled_caught:
        raise GitError(f"git {args[0]} took longer than {seconds:.0f} seconds")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise GitError(f"git {' '.join(args)} failed: {said[-1] if said else done.returncode}")
    return done.stdout.decode(errors="replace")


async def changed_files(cwd: str) -> list[str]:
    """The paths changed, added or removed in the work tree, sorted."""
    out = await git(cwd, "status", "--porcelain", "-z", "--untracked-files=all")
    paths: set[str] = set()
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if entry[0] in "RC":  # a rename's source follows
            next(entries, None)
    return sorted(paths)


async def checkout_branch(cwd: str, branch: str) -> None:
    """Fetch *branch* from origin and check it out, at origin's commit."""
    await git(cwd, "fetch", "origin", f"refs/heads/{branch}")
    await git(cwd, "checkout", "-B", branch, "FETCH_HEAD")


async def commit_all(cwd: str, message: str) -> str:
    """Commit every change of the work tree with *message*; the new commit's id."""
    await git(cwd, "add", "--all")
    await git(cwd, *_IDENTITY, "commit", "--quiet", "--no-verify", "-m", message)
    return (await git(cwd, "rev-parse", "HEAD")).strip()


async def push(cwd: str, branch: str) -> None:
    """Push HEAD to origin's *branch*."""
    await git(cwd, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
