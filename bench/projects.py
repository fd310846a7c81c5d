"""What finding a directory's project costs (``rt.projects``), which every session
creation and every scoped request naming a directory asks.

Usage: .venv/bin/python bench/projects.py [--calls N]

- a git repository not seen yet: ``find_place`` (``git rev-parse`` and ``git rev-list``);
- a directory outside git: ``find_place`` (a few ``stat`` calls, no subprocess);
- a repository seen before: ``Projects.id_of`` from its cache.

None of them reads or writes the store. Medians of *calls* calls (the git case a tenth).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.api._projects import Projects, find_place  # noqa: E402

_GIT = ["git", "-c", "user.email=k@example.com", "-c", "user.name=k", "-c",
        "init.defaultBranch=main"]  # fmt: skip


async def _median_us(call: object, directory: str, calls: int) -> float:
    spent = []
    for _ in range(calls):
        started = time.perf_counter()
        await call(directory)  # type: ignore[operator]
        spent.append(time.perf_counter() - started)
    return statistics.median(spent) * 1e6


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "README.md").write_text("hi\n")
        for command in (["init", "-q"], ["add", "README.md"], ["commit", "-qm", "first"]):
            await trio.run_process([*_GIT, *command], cwd=repo, stdout=subprocess.DEVNULL)
        plain = Path(tmp) / "plain" / "below"
        plain.mkdir(parents=True)
        projects = Projects(storage=None, now_ms=lambda: 0)  # type: ignore[arg-type]
        await projects.place(str(repo))
        found = await _median_us(find_place, str(repo), max(calls // 10, 1))
        outside = await _median_us(find_place, str(plain), calls)
        cached = await _median_us(projects.id_of, str(repo), calls)
    print(f"a git repository not seen yet: {found / 1000:.1f} ms")
    print(f"a directory outside git: {outside:.0f} us")
    print(f"a repository seen before (cached): {cached:.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    trio.run(main, parser.parse_args().calls)
