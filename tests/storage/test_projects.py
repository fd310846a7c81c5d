"""Projects registered durably, on DuckDB and on PostgreSQL: the id of a repository is its
root commit whatever the data dir or the checkout's path, a directory outside git is its
own project, sessions carry their directory's, and only registering writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from actors import ProjectInfo
from actors.api._projects import project_place
from runtime import InvalidSessionInputError, Location, open_runtime

GIT = [
    "git",
    "-c",
    "user.email=k@example.com",
    "-c",
    "user.name=k",
    "-c",
    "init.defaultBranch=main",
]


def _repository(path: Path) -> str:
    path.mkdir(parents=True)
    (path / "README.md").write_text("hi\n")
    for command in (["init", "-q"], ["add", "README.md"], ["commit", "-qm", "first"]):
        subprocess.run([*GIT, *command], cwd=path, check=True)
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True)
    return done.stdout.decode().strip()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(params=["duckdb", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "duckdb":
        return None
    url: str = request.getfixturevalue("postgres_database")
    return url


def test_the_place_of_a_directory_from_what_git_says() -> None:
    outside = project_place("/w/plain")
    assert outside.vcs is None and outside.root == outside.main == "/w/plain"
    assert outside.id == project_place("/w/plain").id != project_place("/w/other").id
    roots = ["f" * 40 + "\n", "a" * 40, ""]
    place = project_place(
        "/w/repo/src", toplevel="/w/tree", common_dir="/w/repo/.git", root_commits=roots
    )
    assert (place.id, place.root, place.main, place.vcs) == ("a" * 40, "/w/tree", "/w/repo", "git")
    empty = project_place("/w/new", toplevel="/w/new", common_dir="/w/new/.git", root_commits=[])
    assert empty.id == project_place("/w/new").id and empty.vcs == "git"
    bare = project_place("/w/t", toplevel="/w/t", common_dir="/srv/repo.git", root_commits=["b"])
    assert bare.main == "/w/t"


async def test_a_repository_is_one_project_on_every_data_dir(
    tmp_path: Path, store_url: str | None
) -> None:
    commit = await trio.to_thread.run_sync(_repository, tmp_path / "repo")
    (tmp_path / "repo" / "src").mkdir()
    clone = tmp_path / "elsewhere" / "clone"
    await trio.to_thread.run_sync(_git, tmp_path, "clone", "-q", "repo", str(clone))
    await trio.to_thread.run_sync(_git, tmp_path / "repo", "worktree", "add", "-q", "../tree")
    async with open_runtime(data_dir=tmp_path / "one", llm=None, store_url=store_url) as rt:
        found = await rt.projects.register(str(tmp_path / "repo" / "src"))
        assert found.id == commit and found.worktree == str(tmp_path / "repo")
        assert found.vcs == "git" and found.sandboxes == ()
        info = await rt.sessions.create(location=Location(directory=str(tmp_path / "tree")))
        assert info.project_id == commit  # found, not registered: creating writes no project
        assert (await rt.projects.get(commit)).sandboxes == ()  # type: ignore[union-attr]
        await rt.projects.registered(str(tmp_path / "tree"))
        assert (await rt.projects.get(commit)).sandboxes == (str(tmp_path / "tree"),)  # type: ignore[union-attr]
        with pytest.raises(InvalidSessionInputError):
            await rt.projects.register(str(tmp_path / "missing"))
        with pytest.raises(InvalidSessionInputError):
            await rt.projects.register("relative")
    other = tmp_path / "two" if store_url is not None else tmp_path / "one"
    async with open_runtime(data_dir=other, llm=None, store_url=store_url) as rt:
        # Another data dir (PostgreSQL: another worker's) and another checkout: the same id.
        assert (await rt.projects.place(str(clone))).id == commit
        again = await rt.projects.register(str(clone))
        assert again.id == commit and again.worktree == str(tmp_path / "repo")
        assert again.sandboxes == (str(tmp_path / "tree"), str(clone))
        assert [p.id for p in await rt.projects.list(limit=10)] == [commit]
        marked = await rt.projects.initialize(str(tmp_path / "repo"))
        assert marked.time_initialized is not None
        assert await rt.projects.get(commit) == marked
        assert await rt.projects.get("0" * 40) is None
        page = await rt.sessions.list(project_id=commit)
        assert [s.id for s in page.data] == [info.id]
        assert (await rt.sessions.list(project_id="0" * 40)).data == []


async def test_a_directory_outside_git_is_its_own_project_and_finding_it_writes_nothing(
    tmp_path: Path, store_url: str | None
) -> None:
    top = tmp_path / "top"
    (top / "a" / "b").mkdir(parents=True)
    async with open_runtime(data_dir=tmp_path / "data", llm=None, store_url=store_url) as rt:
        below = await rt.projects.id_of(str(top / "a" / "b"))
        info = await rt.sessions.create(location=Location(directory=str(top / "a" / "b")))
        assert info.project_id == below
        current = await rt.projects.current(str(top))
        assert current.vcs is None and current.worktree == str(top) and current.id != below
        assert await rt.projects.list(limit=10) == []  # sessions and reads register nothing
        registered: ProjectInfo = await rt.projects.register(str(top))
        assert (registered.id, registered.worktree) == (current.id, current.worktree)
        assert await rt.projects.id_of(str(top / "a" / "b")) == below  # its own, still
        await rt.projects.registered(str(top))  # registered once
        assert [p.id for p in await rt.projects.list(limit=10)] == [registered.id]
