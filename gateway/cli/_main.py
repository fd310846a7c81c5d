"""The ``kittiwake`` command: ``serve``, ``web``, ``run``, ``sessions``, ``inspect``, ``auth``,
``models``, ``mcp`` (``_mcp.py``) and the others ``kittiwake --help`` lists.

Every failure a person can cause (a data dir held by another process, a port in use, a bad
option, a malformed credentials file, an unknown session) ends the command with one line on
standard error and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway._collector import settle_collector
from gateway._datadir import (
    CliError,
    check_free,
    default_data_dir,
    forget_serving,
    held_message,
    record_serving,
    server_headers,
    server_to_reuse,
)
from gateway._limits import DEFAULT_MAX_BODY, size_text
from gateway.cli._args import parser, worker_options
from gateway.cli._plugins import PluginCheck, install_plugin, print_plugins
from gateway.cli._provider import Provider, configured_provider, load_config_warned
from gateway.cli._serving import open_page, warn_open
from gateway.cli._setup import (
    SetupError,
    auth_list,
    auth_login,
    auth_logout,
    configured_model_problem,
    list_models,
    show_config,
)
from gateway.cli._stats import render_summary, render_trace, render_tree, telemetry_options
from gateway.cluster import (
    announce_ready,
    check_store_url,
    cluster_options,
    reach_store,
    serve_with_workers,
    wait_for_stop,
    worker_telemetry_dir,
)
from runtime import llm as llm_package
from runtime import open_runtime
from runtime.config import ConfigError, load_config
from storage import JournalHeld

if TYPE_CHECKING:
    import httpx

    from gateway.http import Room

# The client commands' modules (a terminal's run, sessions, tokens, logins, the Slack and ACP
# rooms) are imported by the commands that use them: serving needs none of them.


__all__ = ["default_data_dir", "main"]

_log = logging.getLogger("kittiwake.cli")
_DEFAULT_PORT: Final = 4096
_DEFAULT_HOST: Final = "127.0.0.1"
_IN_PROCESS: Final = ("run", "sessions", "inspect", "stats", "trace", "plugin", "export", "token")
"""Commands that open the data dir in-process, unless ``--attach`` names a server or a
``serve`` holds the data dir (they talk to that one)."""


# -- commands -----------------------------------------------------------------------------


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir) if args.data_dir else default_data_dir()


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first *kind* in *exc*, the exception groups it is wrapped in, or its causes."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, kind):
            return item
        if isinstance(item, BaseExceptionGroup):
            stack.extend(reversed(item.exceptions))
        if item.__cause__ is not None:
            stack.append(item.__cause__)
    return None


def _check_tls(certfile: str | None, keyfile: str | None) -> None:
    """Raise ``CliError`` unless both or neither are given and the pair loads as TLS
    certificate and key."""
    if certfile is None and keyfile is None:
        return
    if certfile is None or keyfile is None:
        raise CliError("--certfile and --keyfile go together")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise CliError(
            f"cannot load the TLS certificate {certfile} with key {keyfile}: {exc}"
        ) from None


async def _serve(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    directory: Path = args.directory
    password = os.environ.get("KITTIWAKE_SERVER_PASSWORD") or None
    cors = [o for o in os.environ.get("KITTIWAKE_CORS_ORIGINS", "").split(",") if o]
    provider: Provider | None = None
    loaded = trio.Event()
    _check_tls(args.certfile, args.keyfile)
    check_store_url(args.store)

    async def load_gateway() -> None:
        # The web framework's import is about a third of start-up; a worker thread runs
        # it while this thread finds the provider and opens the store (whose DuckDB work
        # runs outside the GIL). A failed import cancels start-up and raises.
        await trio.to_thread.run_sync(partial(import_module, "gateway.http._serve"))
        loaded.set()

    config = load_config_warned(str(directory))
    server_config = config.config.server
    if args.port is None:
        configured = server_config.port if server_config is not None else None
        args.port = configured if configured is not None else _DEFAULT_PORT
    if args.hostname is None:
        configured_host = server_config.hostname if server_config is not None else None
        args.hostname = configured_host or _DEFAULT_HOST
    cors = [*cors, *(server_config.cors or [] if server_config is not None else [])]
    slack = None
    if getattr(args, "slack", False):
        from gateway.cli._slack import slack_settings

        slack = slack_settings(config, directory)
    if slack is not None and args.workers is not None:
        raise CliError("--slack serves in one process (its thread map is one file): not "
                       "with --workers", 2)  # fmt: skip
    if args.workers is not None:
        _end_startup(args)
        warn_open(args.hostname, password)
        return await serve_with_workers(args, data_dir, worker_options)
    try:
        async with trio.open_nursery() as outer:
            outer.start_soon(load_gateway)
            try:
                provider = await configured_provider(
                    data_dir, sys.stderr, config, max_requests=args.provider_requests
                )
            except llm_package.CatalogError as exc:
                print(f"kittiwake: {exc}", file=sys.stderr)
                return 2
            options: dict[str, Any] = provider.options() if provider is not None else {}
            options["telemetry"] = telemetry_options(config.config.telemetry)
            options["store_url"] = args.store
            if args.store is not None:
                options["cluster"] = cluster_options(args)
                await reach_store(args.store, data_dir, options["cluster"].owner)
            if args.worker_slot is not None and options["telemetry"] is not None:
                options["telemetry_dir"] = worker_telemetry_dir(data_dir, args.worker_slot)
            async with open_runtime(
                data_dir=data_dir, llm=provider.client if provider else None, **options
            ) as rt:
                await loaded.wait()
                from gateway._gateway import serve

                rooms: tuple[Room, ...] = ()
                if slack is not None:
                    from gateway.cli._slack import slack_room

                    rooms = (await slack_room(rt, provider, data_dir, slack),)
                async with trio.open_nursery() as nursery:
                    plugins = PluginCheck(rt, directory)
                    nursery.start_soon(plugins.run)
                    try:
                        server = await nursery.start(
                            lambda task_status: serve(
                                rt, args.hostname, args.port, password=password,
                                tokens=args.tokens,
                                cors_origins=cors, directory=directory, task_status=task_status,
                                rooms=rooms,
                                certfile=args.certfile, keyfile=args.keyfile,
                                listen_fd=args.listen_fd,
                            )
                        )  # fmt: skip
                    except BaseException as exc:
                        error = _find(exc, OSError)
                        if not isinstance(error, OSError):
                            raise
                        reason = error.strerror or str(error)
                        where = f"{args.hostname}:{args.port}"
                        raise CliError(f"cannot listen on {where}: {reason}") from None
                    rt.execution.plugins.server_url = server.url
                    await plugins.ready(server)  # a required plugin that failed stops here
                    _end_startup(args)
                    if args.ready_fd is not None:  # a --workers parent serves and records
                        announce_ready(args.ready_fd, args.owner or "")
                    else:
                        record_serving(data_dir, server.url)
                        print(f"kittiwake: serving {server.url} (data in {data_dir})", flush=True)
                        warn_open(args.hostname, password)
                        if args.open_browser is not None:  # kittiwake web
                            page = server.url + "/"
                            await trio.to_thread.run_sync(open_page, page, args.open_browser)
                    try:
                        reason = await wait_for_stop(args.lifeline_fd)
                        print(f"kittiwake: stopping on {reason}", file=sys.stderr)
                        server.stop()
                    finally:
                        forget_serving(data_dir)
    finally:
        if provider is not None:
            await provider.clients.aclose()
    return 0


@asynccontextmanager
async def _api(
    args: argparse.Namespace, *, wanted: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client to ``args.attach`` (given, or the server that holds the data dir) or
    to a runtime served in this process on a free port.

    *wanted* (``provider/model``) picks the in-process runtime's provider for ``run``.
    """
    import httpx

    headers = server_headers()
    timeout = httpx.Timeout(30.0, read=None)
    if args.attach:
        async with httpx.AsyncClient(base_url=args.attach, headers=headers, timeout=timeout) as c:
            yield c
        return
    from gateway._gateway import serve

    data_dir = _data_dir(args)
    provider = None
    config = load_config_warned(os.getcwd())
    if args.command in ("run", "github") or getattr(args, "action", None) == "resume":
        provider = await configured_provider(data_dir, sys.stderr, config, wanted)
    options: dict[str, Any] = provider.options() if provider else {}
    if args.command == "mcp":  # its Locations read their configuration: their servers
        from actors import Configuration

        options["configuration"] = Configuration(env=os.environ)
    options["telemetry"] = telemetry_options(config.config.telemetry)
    if args.command in ("plugin", "auth"):  # the plugins as the configuration names them
        from actors import Configuration

        options["configuration"] = Configuration(env=os.environ)
    try:
        async with open_runtime(
            data_dir=data_dir, llm=provider.client if provider else None, **options
        ) as rt:
            async with trio.open_nursery() as nursery:
                server = await nursery.start(
                    lambda task_status: serve(rt, "127.0.0.1", 0, task_status=task_status)
                )
                try:
                    async with httpx.AsyncClient(base_url=server.url, timeout=timeout) as c:
                        yield c
                finally:
                    server.stop()
    finally:
        if provider is not None:
            await provider.clients.aclose()


async def _run(args: argparse.Namespace) -> int:
    """Prompt a session (new, ``--session`` or ``--continue``) and follow it until idle."""
    from gateway.cli._terminal import Runner, RunOptions

    again = [*(("--attach", args.attach) if args.attach and not args.found_server else ())]
    again += ("--data-dir", args.data_dir) if args.data_dir else ()
    options = RunOptions(
        text=args.text, directory=os.getcwd(), format=args.format, session=args.session,
        continue_latest=args.continue_latest, model=args.model, agent=args.agent,
        command=args.run_command, again=tuple(again),
        password=os.environ.get("KITTIWAKE_SERVER_PASSWORD"),
    )  # fmt: skip
    async with _api(args, wanted=args.model) as api:
        return await Runner(api, options).run()


async def _export(args: argparse.Namespace) -> int:
    from gateway.cli._export import export_command  # the HTTP core loads only when used

    async with _api(args) as api:
        return await export_command(api, args.session, args.format, args.output)


async def _import(args: argparse.Namespace) -> int:
    from gateway.cli._export import import_file

    infos = await import_file(_data_dir(args), args.file)
    for info in infos:
        print(f"imported {info.id}  {info.title}")
    return 0


async def _github(args: argparse.Namespace) -> int:
    from gateway.cli._github import github_command

    return await github_command(args, _api, _data_dir(args))


async def _token(args: argparse.Namespace) -> int:
    from gateway.cli._tokens import token_command

    async with _api(args) as api:
        return await token_command(api, args)


async def _plugin(args: argparse.Namespace) -> int:
    from gateway.cli._terminal import check

    directory = os.path.abspath(args.directory or ".")  # noqa: ASYNC240 - no I/O but getcwd
    if args.action == "add":
        if not args.requirement:
            raise CliError("plugin add needs a requirement (a name, name==version, a path)", 2)
        return await install_plugin(
            args.requirement, directory=directory, global_config=args.global_config,
            seconds=args.pip_timeout, out=sys.stderr,
        )  # fmt: skip
    async with _api(args) as api:
        plugins = check(await api.get("/plugin", params={"directory": directory}))
    return print_plugins(plugins, sys.stdout)


async def _models(args: argparse.Namespace) -> int:
    config = await trio.to_thread.run_sync(load_config, os.getcwd())
    return await list_models(_data_dir(args), args.provider, os.environ, sys.stdout, config=config)


async def _config(args: argparse.Namespace) -> int:
    directory = args.directory or os.getcwd()
    loaded = await trio.to_thread.run_sync(load_config, directory)
    problems: list[str] = []
    if loaded.config.model:  # checked by name: credentials are not configuration
        catalog = await llm_package.load_catalog(
            cache_path=_data_dir(args) / "models-dev.json", config=loaded.data
        )
        try:
            llm_package.resolve_model(catalog, catalog.providers, loaded.config.model)
        except llm_package.CatalogError as exc:
            problems.append(configured_model_problem(loaded, exc))
    return show_config(loaded, sys.stdout, problems=problems)


async def _auth(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    if args.action == "logout":
        return auth_logout(data_dir, args.provider, sys.stderr)
    catalog = await llm_package.load_catalog(cache_path=data_dir / "models-dev.json")
    if args.action == "list":
        return auth_list(data_dir, os.environ, catalog, sys.stdout)

    async def plugins(store: llm_package.CredentialStore) -> bool:
        try:
            args.attach = server_to_reuse(None, data_dir, "auth")
        except CliError as exc:  # held by a process serving no URL: no plugins to ask
            print(f"kittiwake: plugins' login methods not asked: {exc}", file=sys.stderr)
            return False
        from gateway.cli._login import plugin_login

        async with _api(args) as api:
            return await plugin_login(
                api, os.getcwd(), args.provider, store, stdin=sys.stdin, err=sys.stderr
            )

    return await auth_login(
        data_dir, args.provider, catalog, enterprise_url=args.enterprise_url, stdin=sys.stdin,
        err=sys.stderr, plugins=plugins,
    )  # fmt: skip


async def _mcp(args: argparse.Namespace) -> int:
    from gateway.cli._mcp import mcp_command  # the mcp package loads only when used

    return await mcp_command(args, _data_dir(args), _api)


async def _sessions(args: argparse.Namespace) -> int:
    from gateway.cli._sessions import sessions_command

    async with _api(args) as api:
        await sessions_command(api, args)
    return 0


async def _inspect(args: argparse.Namespace) -> int:
    from gateway.cli._terminal import check

    async with _api(args) as api:
        print(render_tree(check(await api.get("/api/actors"))))
    return 0


async def _stats(args: argparse.Namespace) -> int:
    from gateway.cli._terminal import check

    async with _api(args) as api:
        params = {"by": args.by, "since": args.since}
        body = check(await api.get("/api/telemetry/summary", params=params))
    print(render_summary(body["data"], args.by, sample=body.get("sample")))
    return 0


async def _trace(args: argparse.Namespace) -> int:
    from gateway.cli._terminal import check

    async with _api(args) as api:
        params = {"sessionID": args.session}
        spans = check(await api.get("/api/telemetry/spans", params=params))["data"]
    print(render_trace(spans, drains=args.drains))
    return 0


def _end_startup(args: argparse.Namespace) -> None:
    """Freeze what start-up built and resume the collector, if the launcher paused it.

    See ``gateway/__main__.py``: everything alive now lives as long as the process, so
    ``gc.freeze()`` keeps later collections from walking it; ``serve`` and ``web`` also
    collect the young generation less often (``settle_collector``). Runs once; later calls
    do nothing.
    """
    if args.collector_paused:
        args.collector_paused = False
        settle_collector(serving=args.command in ("serve", "web"))


def main(argv: Sequence[str] | None = None, *, collector_paused: bool = False) -> int:
    """Run one ``kittiwake`` command; returns the exit status.

    ``collector_paused`` says the caller (``gateway/__main__.py``) paused the cyclic
    collector for start-up: ``serve`` resumes it once accepting, other commands at once.
    A failure a person can cause is printed as one line (see the module docstring).
    """
    words = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if words[:2] == ["mcp", "add"] and "--" in words:  # a local server's own options
        at = words.index("--")
        words, command = words[:at], words[at + 1 :]
    args = parser().parse_args(words)
    if command:
        args.rest = [*args.rest, *command]
    args.collector_paused = collector_paused
    if args.command not in ("serve", "web"):
        _end_startup(args)
    try:
        return _dispatch(args)
    except BaseException as exc:
        return _report(exc, args)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "sessions" and args.action not in ("list", "watch") and not args.id:
        raise CliError(f"sessions {args.action} needs a session id", 2)
    if args.command == "run":
        from gateway.cli._terminal import admission_body, read_prompt

        # Refused before anything is created or opened.
        args.text = read_prompt(args.prompt, sys.stdin)
        if not args.text and not args.run_command:
            raise CliError("run needs a prompt: as arguments, or piped on standard input", 2)
        size = len(admission_body(args.text, args.run_command))
        if size > DEFAULT_MAX_BODY:
            raise CliError(
                f"the prompt is {size} bytes as sent, over the server's request limit of "
                f"{size_text(DEFAULT_MAX_BODY)}", 2,
            )  # fmt: skip
    if args.command == "web":
        if args.workers is not None:
            raise CliError("web serves in one process; use serve --workers and open its URL", 2)
        held_by = server_to_reuse(None, _data_dir(args), "web")
        if held_by is not None:
            return open_page(held_by.rstrip("/") + "/", args.open_browser)
        args.command = "serve"
    if args.command == "serve":
        args.directory = Path(args.directory or os.getcwd()).resolve()
        if not args.directory.is_dir():
            raise CliError(f"--directory {args.directory}: not a directory", 2)
        check_free(_data_dir(args), args.command)
    args.found_server = False
    if args.command in _IN_PROCESS and not args.attach:
        args.attach = server_to_reuse(None, _data_dir(args), args.command)
        args.found_server = args.attach is not None
        if args.found_server:
            print(
                f"kittiwake: attaching to the kittiwake serve on {args.attach} that holds "
                f"{_data_dir(args)}", file=sys.stderr, flush=True,
            )  # fmt: skip
    if args.command == "mcp" and args.action in ("list", "ls") and not args.attach:
        args.attach = server_to_reuse(None, _data_dir(args), args.command)
        args.found_server = args.attach is not None
    _configure_logging(args)
    if args.command == "auth" and args.action != "list" and not args.provider:
        raise CliError(f"auth {args.action} needs a provider id (kittiwake models lists them)", 2)
    command = {
        "serve": _serve, "run": _run, "sessions": _sessions, "inspect": _inspect,
        "models": _models, "auth": _auth, "config": _config, "stats": _stats, "trace": _trace,
        "mcp": _mcp,
        "plugin": _plugin,
        "export": _export,
        "import": _import,
        "github": _github,
        "token": _token,
        "tui": lambda args: import_module("gateway.opencode._tui").tui(args),
        "acp": lambda args: import_module("gateway.cli._acp").acp(args),
        "slack": lambda args: import_module("gateway.cli._slack").slack(args),
    }  # fmt: skip
    return trio.run(command[args.command], args)


def _configure_logging(args: argparse.Namespace) -> None:
    """Log to standard error at ``$KITTIWAKE_LOG`` (default WARNING); but a command that runs
    the runtime in-process for a person at a terminal (``run``, ``sessions``, ``inspect``
    without a server to talk to) writes the runtime's warnings to
    ``<data dir>/log/kittiwake.log`` unless ``KITTIWAKE_LOG`` is set: what failed is told in
    one line, not a traceback."""
    level = os.environ.get("KITTIWAKE_LOG", "").upper()
    in_process = args.command in _IN_PROCESS and not args.attach
    if level or not in_process:
        logging.basicConfig(level=level or "WARNING")
        return
    folder = _data_dir(args) / "log"
    folder.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level="WARNING", filename=folder / "kittiwake.log")


def _report(exc: BaseException, args: argparse.Namespace) -> int:
    """Print *exc* as one line and return its exit status; re-raise what is not a known failure."""
    if _find(exc, KeyboardInterrupt) is not None:
        return 130
    if isinstance(exc, SystemExit):
        raise exc
    held = _find(exc, JournalHeld)  # taken between the check and the opening
    if isinstance(held, JournalHeld):
        print(f"kittiwake: {held_message(held, _data_dir(args), args.command)}", file=sys.stderr)
        return 1
    if _find(exc, BrokenPipeError) is not None:  # the reader left (`kittiwake models | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    for usage in (llm_package.CatalogError, ConfigError):
        found = _find(exc, usage)  # an unknown model; a configuration file that cannot be used
        if found is not None:
            print(f"kittiwake: {found}", file=sys.stderr)
            return 2
    terminal = sys.modules.get("gateway.cli._terminal")  # only a client command raises it
    failures = (CliError, SetupError, llm_package.AuthError)
    for kind in (*failures, *((terminal.RunFailed,) if terminal is not None else ())):
        found = _find(exc, kind)
        if found is not None:
            print(f"kittiwake: {found}", file=sys.stderr)
            return found.code if isinstance(found, CliError) else 1
    duckdb = sys.modules.get("duckdb")  # a telemetry file another process holds
    held_file = _find(exc, duckdb.IOException) if duckdb is not None else None
    if held_file is not None:
        print(f"kittiwake: {str(held_file).splitlines()[0]}", file=sys.stderr)
        return 1
    # httpx is imported only by commands that talk HTTP; no other can raise its errors.
    httpx = sys.modules.get("httpx")
    found = _find(exc, httpx.HTTPError) if httpx is not None else None
    if found is not None:
        print(f"kittiwake: cannot reach the server: {found}", file=sys.stderr)
        return 2
    raise exc


if __name__ == "__main__":
    raise SystemExit(main())
