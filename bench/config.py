"""Configuration loading: a 300-line JSONC project file with 20 providers.

Run: .venv/bin/python bench/config.py [--iterations N]

Writes a global file, a project file of about 300 lines (20 OpenAI-compatible providers
with two models each, agents, permission rules, comments, trailing commas, ``{env:}``
references) and an inline ``KITTIWAKE_CONFIG_CONTENT``, then times ``load_config`` (read,
substitute, parse, validate and merge every source), the pure steps on their own, and the
unchanged-files check a Location makes at each provider turn (``ConfigWatch``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio

from runtime.config import ConfigWatch, load_config, parse_document

PROVIDERS = 20


def project_text() -> str:
    """About 300 lines of JSONC."""
    lines = ["{", '  "$schema": "https://opencode.ai/config.json",', '  "model": "p0/m0",']
    lines.append('  "provider": {')
    for i in range(PROVIDERS):
        lines += [
            f"    // provider {i}: a local OpenAI-compatible endpoint",
            f'    "p{i}": {{',
            '      "npm": "@ai-sdk/openai-compatible",',
            f'      "name": "Provider {i}",',
            '      "options": {',
            f'        "baseURL": "http://127.0.0.1:{8000 + i}/v1",',
            '        "apiKey": "{env:BENCH_KEY}",',
            '        "headers": {"X-Team": "bench"},',
            "      },",
            '      "models": {',
            '        "m0": {"name": "Model 0", "limit": {"context": 128000, "output": 8192}},',
            '        "m1": {"name": "Model 1", "tool_call": true, "reasoning": false},',
            "      },",
            "    },",
        ]
    lines.append("  },")
    lines += ['  "agent": {']
    for name in ("review", "docs", "triage"):
        lines += [
            f'    "{name}": {{',
            f'      "description": "The {name} agent",',
            '      "mode": "primary",',
            '      "steps": 20,',
            '      "permission": {"bash": {"git *": "allow", "*": "ask"}, "edit": "deny"},',
            "    },",
        ]
    lines += ["  },", '  "permission": {"bash": "ask", "edit": "allow"},']
    lines += ['  "instructions": ["docs/*.md", "CONTRIBUTING.md"],', "}"]
    return "\n".join(lines) + "\n"


def _summary(label: str, samples: list[int]) -> str:
    ordered = sorted(samples)
    median = statistics.median(ordered) / 1e6
    p95 = ordered[int(len(ordered) * 0.95) - 1] / 1e6
    return f"{label:<52} median {median:7.3f} ms   p95 {p95:7.3f} ms   (n={len(ordered)})"


def _time(fn: Callable[[], object], n: int) -> list[int]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return samples


async def _watch_checks(watch: ConfigWatch[object], n: int) -> list[int]:
    await watch.load()
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        await watch.load()
        samples.append(time.perf_counter_ns() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        (project / ".git").mkdir(parents=True)
        text = project_text()
        (project / "kittiwake.jsonc").write_text(text)
        (root / "xdg" / "kittiwake").mkdir(parents=True)
        (root / "xdg" / "kittiwake" / "kittiwake.json").write_text('{"username": "bench"}')
        env = {
            "HOME": str(root),
            "XDG_CONFIG_HOME": str(root / "xdg"),
            "BENCH_KEY": "sk-bench",
            "KITTIWAKE_CONFIG_CONTENT": '{"small_model": "p1/m1"}',
        }
        loaded = load_config(str(project), env)
        assert len(loaded.config.provider or {}) == PROVIDERS and not loaded.diagnostics
        print(
            f"project file: {text.count(chr(10))} lines, {len(text)} bytes, {PROVIDERS} providers"
        )
        n = args.iterations
        print(
            _summary(
                "load_config (3 sources, files read)",
                _time(lambda: load_config(str(project), env), n),
            )
        )
        parse = lambda: parse_document(  # noqa: E731
            text, source="p", env=env, base_dir=str(project), home=str(root), read_file=str
        )
        print(_summary("parse_document (substitute, parse, validate)", _time(parse, n)))

        def loader() -> tuple[object, list[str]]:
            result = load_config(str(project), env)
            return result, result.looked_at

        time.sleep(0.2)  # the watch trusts stamps of files last changed over 100 ms ago
        watch: ConfigWatch[object] = ConfigWatch(loader)
        samples = trio.run(_watch_checks, watch, n)
        print(_summary("ConfigWatch.load, files unchanged (per turn)", samples))


if __name__ == "__main__":
    main()
