"""``python -m sims run|replay|shrink``: seeded simulation runs of the whole runtime.

    python -m sims run --seeds 1000 [--start 0] [--sessions 50] [--faults provider,storage.crash]
                       [--without questions]
    python -m sims replay SEED [--sessions 50] [--workload shrunk.json]
    python -m sims shrink SEED [--sessions 50] [--out shrunk.json]

``run`` prints a progress bar and a summary table (faults injected, invariants checked)
and exits 1 when any seed broke an invariant. ``replay`` prints one seed's trace step by
step and its violations. ``shrink`` finds a smaller workload that still breaks the same
invariant and writes it for ``replay --workload``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import msgspec

from sims._planted import PLANTS, planted
from sims._runner import expand_faults, run_many, shrink, summary_table
from sims._sim import Result, run_seed, seed_workload
from sims._workload import ALL_FEATURES, DEFAULT_SESSIONS, Features, Workload


def _progress(total: int) -> tuple[object, list[int]]:
    state = [0, 0]

    def show(result: Result) -> None:
        state[0] += 1
        state[1] += bool(result.violations)
        if state[0] % 10 and state[0] != total:
            return
        width = 40
        filled = width * state[0] // total
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {state[0]}/{total} seeds, "
            f"{state[1]} failing"
        )
        if state[0] == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show, state


def _pair(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    return int(low), int(high or low)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sims", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "replay", "shrink"):
        sub = commands.add_parser(name)
        if name == "run":
            sub.add_argument("--seeds", type=int, required=True, help="how many seeds")
            sub.add_argument("--start", type=int, default=0, help="the first seed")
            sub.add_argument("--workers", type=int, default=2, help="worker processes")
        else:
            sub.add_argument("seed", type=int)
        sub.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
        sub.add_argument("--actions", type=_pair, default=(3, 9), help="actions per session: LO,HI")
        sub.add_argument("--faults", default="all", help="kinds or groups, comma-separated")
        sub.add_argument(
            "--without",
            default="",
            help=f"features left out, comma-separated ({', '.join(ALL_FEATURES)}): the "
            "simulator from before they existed, for the seeds found then",
        )
        sub.add_argument(
            "--plant", choices=sorted(PLANTS), help="run a deliberately broken runtime"
        )
        if name == "replay":
            sub.add_argument("--workload", type=Path, help="a workload written by shrink")
        if name == "shrink":
            sub.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    faults = expand_faults(args.faults)
    try:
        features = Features.without(args.without)
    except ValueError as exc:
        parser.error(str(exc))
    with planted(args.plant):
        if args.command == "run":
            show, _ = _progress(args.seeds)
            summary = run_many(
                range(args.start, args.start + args.seeds), sessions=args.sessions,
                faults=faults, workers=args.workers, per_session=args.actions, on_result=show,  # type: ignore[arg-type]
                features=features,
            )  # fmt: skip
            low, high = args.actions
            replay = f" --sessions {args.sessions} --actions {low},{high}"
            if args.faults != "all":
                replay += f" --faults {args.faults}"
            if args.plant:
                replay += f" --plant {args.plant}"
            if args.without:
                replay += f" --without {args.without}"
            summary_table(summary, sys.stdout, replay)
            return 1 if summary.failing else 0
        workload = None
        if args.command == "replay" and args.workload is not None:
            workload = msgspec.json.decode(args.workload.read_bytes(), type=Workload)
        result = run_seed(
            args.seed, sessions=args.sessions, faults=faults, per_session=args.actions,
            workload=workload, features=features,
        )  # fmt: skip
        if args.command == "replay":
            print(f"seed {result.seed}: faults {result.faults}; injected {result.injected}")
            for line in result.trace:
                print(line)
            for violation in result.violations:
                print(f"VIOLATION {violation}")
            return 1 if result.violations else 0
        if not result.violations:
            print(f"seed {args.seed} breaks no invariant; nothing to shrink")
            return 0
        broken = result.violations[0].split(":", 1)[0]
        first = seed_workload(args.seed, args.sessions, faults, args.actions, features=features)

        def fails(candidate: Workload) -> bool:
            again = run_seed(
                args.seed, faults=faults, workload=candidate, trace=False, features=features
            )
            return any(v.startswith(broken + ":") for v in again.violations)

        small = shrink(args.seed, first, fails, log=lambda line: print(line, file=sys.stderr))
        out = args.out or Path(f"sims-{args.seed}-shrunk.json")
        out.write_bytes(msgspec.json.format(msgspec.json.encode(small)))
        print(f"seed {args.seed} still breaks {broken} with {small.sessions} sessions and "
              f"{len(small.actions)} actions (from {len(first.actions)}): {out}\n"
              f"  replay: python -m sims replay {args.seed} --workload {out}"
              f"{' --plant ' + args.plant if args.plant else ''}"
              f"{' --without ' + args.without if args.without else ''}")  # fmt: skip
        return 1


if __name__ == "__main__":
    sys.exit(main())
