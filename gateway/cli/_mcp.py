"""``kittiwake mcp``: add a server to the configuration, list the servers and their status,
sign in to a remote one (the browser, then its callback), sign out, and debug one.

``add`` edits the project's (or the global) configuration file in place, its comments
kept. ``list`` asks a runtime (the ``serve`` holding the data dir, else one run here) for
``GET /mcp``. ``auth``, ``logout`` and ``debug`` work on ``<data dir>/mcp-auth.json`` here,
and tell a ``serve`` holding the data dir to connect the server again after them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway._datadir import CliError, server_headers, server_to_reuse
from gateway.cli._provider import load_config_warned
from runtime.config import (
    global_config_file,
    project_config_file,
    worktree_root,
    write_config_value,
)
from runtime.mcp import (
    McpAuthRequired,
    McpAuthStore,
    McpOAuth,
    McpServerSpec,
    McpSignInError,
    diagnose,
    server_specs,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["mcp_command"]

Api = Callable[[argparse.Namespace], AbstractAsyncContextManager["httpx.AsyncClient"]]
_ICONS: Final = {
    "connected": "✓", "disabled": "○", "needs_auth": "⚠", "failed": "✗",
    "needs_client_registration": "✗",
}  # fmt: skip
_TEXT: Final = {
    "needs_auth": "needs authentication",
    "needs_client_registration": "needs client registration",
}
_AUTH_ICONS: Final = {"authenticated": "✓", "expired": "⚠", "not_authenticated": "✗"}


async def mcp_command(args: argparse.Namespace, data_dir: Path, api: Api) -> int:
    """Run ``kittiwake mcp ACTION``; its exit status. *api* opens the HTTP client ``list``
    talks to."""
    if args.action == "add":
        return await trio.to_thread.run_sync(_add, args)
    if args.action in ("list", "ls"):
        return await _list(args, data_dir, api)
    specs = await trio.to_thread.run_sync(_specs)
    if args.action == "auth":
        return await _auth(args, data_dir, specs)
    if args.action == "logout":
        return await _logout(args, data_dir)
    return await _debug(args, data_dir, specs)


def _specs() -> dict[str, McpServerSpec]:
    directory = os.getcwd()
    return server_specs(load_config_warned(directory).config, directory)


def _pairs(values: list[str], kind: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in values:
        key, equals, value = entry.partition("=")
        if not key or not equals:
            raise CliError(f"invalid {kind}: {entry}; expected KEY=VALUE", 2)
        out[key] = value
    return out


def _add(args: argparse.Namespace) -> int:
    command = [c for c in args.rest if c != "--"]
    if not args.name:
        raise CliError("mcp add needs a server name", 2)
    if bool(args.url) == bool(command):
        raise CliError("mcp add: give either --url URL or a command after --", 2)
    if args.url and not args.url.startswith(("http://", "https://")):
        raise CliError(f"mcp add: --url must be http:// or https://, got {args.url}", 2)
    if args.url and args.env:
        raise CliError("mcp add: --env is only for local servers (a command)", 2)
    if command and args.header:
        raise CliError("mcp add: --header is only for remote servers (--url)", 2)
    entry: dict[str, Any]
    if args.url:
        entry = {"type": "remote", "url": args.url}
        if args.header:
            entry["headers"] = _pairs(args.header, "header")
    else:
        entry = {"type": "local", "command": command}
        if args.env:
            entry["environment"] = _pairs(args.env, "environment variable")
    if args.scope == "global":
        path = global_config_file(os.environ)
    else:
        path = project_config_file(worktree_root(os.getcwd()))
    write_config_value(path, ("mcp", args.name), entry)
    print(f'MCP server "{args.name}" added to {path} ({args.scope})')
    return 0


async def _list(args: argparse.Namespace, data_dir: Path, api: Api) -> int:
    specs = await trio.to_thread.run_sync(_specs)
    if not specs:
        print("No MCP servers configured (add one with: kittiwake mcp add)")
        return 0
    async with api(args) as http:
        answer = await http.get("/mcp", params={"directory": os.getcwd()})
        answer.raise_for_status()
        statuses: dict[str, dict[str, str]] = answer.json()
    oauth = McpOAuth(str(data_dir))
    for name, spec in specs.items():
        status = statuses.get(name, {"status": "disabled"})
        state = status["status"]
        text = _TEXT.get(state, state)
        if state == "connected" and spec.type == "remote" and spec.oauth:
            text += " (OAuth)" if oauth.token_state(spec) == "authenticated" else ""
        error = f": {status['error']}" if status.get("error") else ""
        where = spec.url if spec.type == "remote" else " ".join(spec.command)
        print(f"{_ICONS.get(state, '?')} {name}  {text}{error}\n    {where}")
    print(f"{len(specs)} server(s)")
    return 0


def _signable(specs: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
    return {n: s for n, s in specs.items() if s.type == "remote" and s.oauth and s.enabled}


def _pick(name: str | None, candidates: list[str], what: str) -> str:
    if name:
        return name
    if len(candidates) == 1:
        return candidates[0]
    listed = ", ".join(candidates) if candidates else "none"
    raise CliError(f"name the server to {what} (kittiwake mcp {what} NAME): {listed}", 2)


async def _auth(args: argparse.Namespace, data_dir: Path, specs: dict[str, McpServerSpec]) -> int:
    oauth = McpOAuth(str(data_dir))
    signable = _signable(specs)
    if args.name in ("list", "ls"):
        for each in signable.values():
            state = oauth.token_state(each)
            print(f"{_AUTH_ICONS[state]} {each.name}  {state.replace('_', ' ')}\n    {each.url}")
        print(f"{len(signable)} OAuth-capable server(s)")
        return 0
    name = _pick(args.name, list(signable), "auth")
    spec = specs.get(name)
    if spec is None:
        raise CliError(f"MCP server not found: {name}")
    if name not in signable:
        raise CliError(f"MCP server {name} is not an OAuth-capable remote server")
    async with trio.open_nursery() as nursery:
        await nursery.start(oauth.run)
        try:
            await _sign_in(oauth, spec, args.no_browser)
        finally:
            nursery.cancel_scope.cancel()
    await _tell_server(data_dir, "POST", f"/mcp/{name}/connect")
    return 0


async def _sign_in(oauth: McpOAuth, spec: McpServerSpec, no_browser: bool) -> None:
    try:
        flow = await oauth.start(spec)
    except McpAuthRequired as exc:
        raise CliError(
            f"{exc}\nAdd a client to the server's configuration: "
            f'"oauth": {{"clientId": "...", "clientSecret": "..."}}'
        ) from None
    except McpSignInError as exc:
        raise CliError(str(exc)) from None
    if flow is None:
        print(f"{spec.name}: signed in already (the server accepts the stored token)")
        return
    print(f"Authorize in your browser:\n  {flow.authorization_url}", flush=True)
    if not no_browser and not await oauth.open_browser(flow.authorization_url):
        print("kittiwake: no browser could be opened: open the URL above", file=sys.stderr)
    print(
        f"kittiwake: waiting for the browser to come back to {flow.redirect_uri} "
        f"({oauth.limits.flow_timeout:g} s at most)", file=sys.stderr, flush=True,
    )  # fmt: skip
    try:
        await flow.wait()
    except McpSignInError as exc:
        raise CliError(f"sign-in failed: {exc}") from None
    print(f"Signed in to {spec.name} (tokens in {oauth.store.path})")


async def _logout(args: argparse.Namespace, data_dir: Path) -> int:
    store = McpAuthStore(data_dir)
    stored = await trio.to_thread.run_sync(store.load)
    name = _pick(args.name, list(stored), "logout")
    if not await trio.to_thread.run_sync(store.remove, name):
        raise CliError(f"No credentials found for: {name}")
    print(f"Removed OAuth credentials for {name}")
    await _tell_server(data_dir, "DELETE", f"/mcp/{name}/auth")
    return 0


async def _debug(args: argparse.Namespace, data_dir: Path, specs: dict[str, McpServerSpec]) -> int:
    if not args.name:
        raise CliError("mcp debug needs a server name", 2)
    spec = specs.get(args.name)
    if spec is None:
        raise CliError(f"MCP server not found: {args.name}")
    if spec.type != "remote":
        raise CliError(f"MCP server {args.name} is not a remote server")
    for label, value in await diagnose(McpOAuth(str(data_dir)), spec):
        print(f"{label}: {value}")
    return 0


async def _tell_server(data_dir: Path, method: str, path: str) -> None:
    """Have the ``serve`` holding *data_dir*, if any, see a sign-in or sign-out now (its
    server of the current directory connects again); a failure is only reported."""
    import httpx

    try:
        url = await trio.to_thread.run_sync(server_to_reuse, None, data_dir, "mcp")
    except CliError:
        return
    if url is None:
        return
    try:
        async with httpx.AsyncClient(base_url=url, headers=server_headers(), timeout=30) as http:
            answer = await http.request(method, path, params={"directory": os.getcwd()})
    except httpx.HTTPError as exc:
        print(f"kittiwake: could not tell {url}: {exc}", file=sys.stderr)
        return
    if answer.is_success:
        print(f"kittiwake: {url} connects the server again", file=sys.stderr)
