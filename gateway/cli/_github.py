"""``kittiwake github run``: the GitHub Actions event answered by one session in the
current directory (the checkout), run in-process as ``kittiwake run`` runs one.

The session runs with the question tool denied (nobody answers in CI; permission
requests are rejected as ``run`` rejects them without a terminal). Before it starts,
the token left the environment (``gateway.github``) and so did every provider's key
variable, once the provider clients were made: no tool or shell command sees them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.cli._export import read_export, read_session
from gateway.cli._terminal import RunFailed, Runner, RunOptions
from gateway.github import DEFAULT_MENTIONS, GitHubOptions, Ran, SessionFailed, github_run
from runtime import llm as llm_package
from runtime.config import CONFIG_CONTENT_ENV, load_config

if TYPE_CHECKING:
    import httpx

__all__ = ["deny_question", "github_command", "scrub_provider_keys"]

OpenApi = Callable[..., AbstractAsyncContextManager["httpx.AsyncClient"]]


def deny_question(environ: MutableMapping[str, str]) -> None:
    """Add ``"permission": {"question": "deny"}`` to ``KITTIWAKE_CONFIG_CONTENT`` (read
    last, so it wins), keeping what it held."""
    content: dict[str, Any] = {}
    if environ.get(CONFIG_CONTENT_ENV):
        try:
            loaded = json.loads(environ[CONFIG_CONTENT_ENV])
        except ValueError:
            loaded = None  # load_config reports it
        if isinstance(loaded, dict):
            content = loaded
    rules = content.get("permission")
    if isinstance(rules, str):
        rules = {"*": rules}
    content["permission"] = {**(rules if isinstance(rules, dict) else {}), "question": "deny"}
    environ[CONFIG_CONTENT_ENV] = json.dumps(content)


async def scrub_provider_keys(
    environ: MutableMapping[str, str], data_dir: Path, directory: str
) -> list[str]:
    """Remove from *environ* every variable a provider of the catalog (and of the
    configuration of *directory*) reads its key from; the names removed."""
    catalog = await llm_package.load_catalog(cache_path=data_dir / "models-dev.json")
    loaded = load_config(directory, environ)
    if loaded.data:
        catalog = catalog.with_config(loaded.data)
    names = sorted({name for p in catalog.providers.values() for name in p.env if name in environ})
    for name in names:
        del environ[name]
    return names


async def github_command(args: argparse.Namespace, open_api: OpenApi, data_dir: Path) -> int:
    """Answer the event GitHub's variables name; the exit status (``github_run``'s)."""
    directory = os.getcwd()
    mentions = tuple(m.strip() for m in (args.mentions or "").split(",") if m.strip())
    options = GitHubOptions(
        directory=directory, mentions=mentions or DEFAULT_MENTIONS, prompt=args.prompt or None,
        artifact_dir=args.artifact_dir,
    )  # fmt: skip
    deny_question(os.environ)

    async def run_session(prompt: str) -> Ran:
        try:
            return await _run_session(prompt)
        except* (RunFailed, llm_package.CatalogError, llm_package.AuthError, OSError) as group:
            raise SessionFailed(str(group.exceptions[0])) from None

    async def _run_session(prompt: str) -> Ran:
        async with open_api(args, wanted=args.model) as api:
            await scrub_provider_keys(os.environ, data_dir, directory)
            follow = RunOptions(
                text=prompt, directory=directory, model=args.model, agent=args.agent
            )
            runner = Runner(api, follow, terminal=lambda: None)
            error: str | None = None
            try:
                await runner.run()
            except RunFailed as exc:
                error = str(exc)
            if runner.session_id is None:
                raise RunFailed(error or "no session was created")
            info, messages = await read_session(api, runner.session_id)
            export = await read_export(api, runner.session_id)
        if error is None and info.last_error is not msgspec.UNSET:
            error = f"{info.last_error.tag}: {info.last_error.message}"
        return Ran(info=info, messages=messages, export=export, error=error)

    return await github_run(os.environ, options, run_session, log=sys.stderr)
