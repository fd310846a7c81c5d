"""The ``kittiwake`` command line: every command, option and environment variable it reads."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version
from typing import Final, NoReturn

__all__ = ["parser", "worker_options"]

_ENVIRONMENT: Final = """\
environment:
  KITTIWAKE_DATA_DIR         the data dir (else $XDG_DATA_HOME/kittiwake, else
                             ~/.local/share/kittiwake); --data-dir wins over it
  KITTIWAKE_MODEL            provider/model: the default model (run --model wins)
  KITTIWAKE_SERVER_PASSWORD  HTTP basic auth password of serve, and the one --attach sends
  KITTIWAKE_SERVER_TOKEN     a bearer token --attach (and token, acp, mcp) sends instead
  KITTIWAKE_CORS_ORIGINS     comma-separated origins serve allows (CORS is off without it)
  KITTIWAKE_LOG              log level (default WARNING); set, run/sessions/inspect log to
                             standard error instead of <data dir>/log/kittiwake.log
  KITTIWAKE_CONFIG           a configuration file read after the global one
  KITTIWAKE_CONFIG_CONTENT   inline configuration JSON, read last (wins)
  KITTIWAKE_DISABLE_PROJECT_CONFIG
                             1 or true: read no project configuration files
  XDG_CONFIG_HOME            the global configuration is $XDG_CONFIG_HOME/kittiwake/
                             kittiwake.json (else ~/.config/kittiwake/kittiwake.json)
  SLACK_BOT_TOKEN, SLACK_APP_TOKEN
                             slack: the bot's and the app's tokens (else kittiwake.json's
                             slack.botToken and slack.appToken)
  SLACK_SIGNING_SECRET       serve --slack: the Slack app's signing secret (else
                             kittiwake.json's slack.signingSecret)
  SLACK_API_URL              slack: Slack's Web API (default https://slack.com/api/)
  ANTHROPIC_API_KEY, OPENAI_API_KEY, ...
                             a provider's API key, named by the model catalog (see
                             `kittiwake models`); `kittiwake auth login` stores one instead

exit status: 0 done, 1 failed (one line says why), 2 bad usage or server unreachable,
130 interrupted (Ctrl-C)"""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port number (0-65535)")
    return port


def _count(text: str, *, of: str = "workers") -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a number of {of} (1 or more)")
    return count


def _requests(text: str) -> int:
    return _count(text, of="requests")


def _version() -> str:
    try:
        return version("kittiwake")
    except PackageNotFoundError:
        return "unknown"


DEFAULT_PROVIDER_REQUESTS: Final = 256
"""``serve --provider-requests``: 200 sessions streaming at once are not held to 100."""
_DATA_DIR_HELP: Final = "the data dir (default: $KITTIWAKE_DATA_DIR, else $XDG_DATA_HOME/kittiwake)"
_PER_WORKER: Final = ("--owner", "--worker-slot", "--listen-fd", "--ready-fd", "--lifeline-fd")
"""What a ``--workers`` parent tells each worker itself (``gateway/cluster/_workers.py``); hidden."""
_PARENT_ONLY: Final = ("--workers", "--port")
"""Serve options a ``--workers`` parent keeps: it binds the port once (each worker is
handed the socket and told the bound port)."""


def _add_serve_options(serve: argparse.ArgumentParser) -> list[argparse.Action]:
    """Add the options of ``serve`` to *serve*; return them."""
    added = [
        serve.add_argument(
            "--port", type=_port,
            help="TCP port (default: the configuration's server.port, else 4096; 0: any)",
        ),
        serve.add_argument(
            "--hostname",
            help="address (default: the configuration's server.hostname, else 127.0.0.1)",
        ),
        serve.add_argument("--data-dir", help=_DATA_DIR_HELP),
        serve.add_argument(
            "--store", metavar="URL", help="keep sessions in PostgreSQL at URL (postgresql://...) "
            "instead of DuckDB in the data dir; see --workers and docs/cluster.md",
        ),
        serve.add_argument(
            "--workers", type=_count, metavar="N", help="with --store: bind once and serve with "
            "N worker processes, each restarted if it dies (docs/cluster.md)",
        ),
        serve.add_argument(
            "--provider-requests", type=_requests, default=DEFAULT_PROVIDER_REQUESTS,
            metavar="N", help="provider requests one process streams at once; more wait for "
            f"one to end (default {DEFAULT_PROVIDER_REQUESTS}; each is a connection, so "
            "mind the open-files limit)",
        ),
        serve.add_argument(
            "--lease-ttl", type=float, default=10.0, metavar="SECONDS",
            help="with --store: how long a session's lease lasts unrenewed, so how soon another "
            "worker takes over the sessions of one that died (default 10)",
        ),
        serve.add_argument(
            "--lease-idle", type=float, default=5.0, metavar="SECONDS",
            help="with --store: how long a worker keeps a session's lease parked after its "
            "drains went idle, so that its next prompt is not acquired again (default 5; 0: "
            "released at once)",
        ),
    ]  # fmt: skip
    for hidden in _PER_WORKER:
        kind = str if hidden == "--owner" else int
        added.append(serve.add_argument(hidden, help=argparse.SUPPRESS, type=kind))
    added += [
        serve.add_argument(
            "--certfile", help="PEM certificate (chain): serve HTTPS (needs --keyfile)"
        ),
        serve.add_argument("--keyfile", help="PEM private key of --certfile"),
        serve.add_argument(
            "--tokens", action="store_true", help="a team server: accept bearer tokens "
            "(kittiwake token create) and refuse requests without credentials; "
            "KITTIWAKE_SERVER_PASSWORD, if set, stays an admin of every project "
            "(docs/security.md)",
        ),
        serve.add_argument(
            "--directory", help="the project directory: where sessions without one work and the "
            "file routes are confined (default: the current directory)",
        ),
        serve.add_argument(
            "--slack", action="store_true", help="serve the Slack bot over Slack's HTTP Events "
            "API at POST /slack/events (SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET, or "
            "kittiwake.json's slack section; not with --workers; docs/slack.md)",
        ),
    ]  # fmt: skip
    return added


def worker_options(args: argparse.Namespace) -> list[str]:
    """The options a ``serve --workers`` parent with *args* passes on to each worker: every
    ``serve`` option that has a value (given, defaulted, or resolved by the parent), except
    ``--workers``, ``--port`` and those the parent sets for each worker itself. Derived
    from the options ``serve`` has, so an option added to it reaches the workers too."""
    forwarded: list[str] = []
    for action in _add_serve_options(_Parser(add_help=False)):
        flag = action.option_strings[0]
        value = getattr(args, action.dest, None)
        if flag in _PARENT_ONLY or flag in _PER_WORKER or value is None or value is False:
            continue
        forwarded += [flag] if value is True else [flag, str(value)]
    return forwarded


def parser() -> argparse.ArgumentParser:
    """The parser of ``kittiwake`` and its commands (``--help`` is their documentation)."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="kittiwake",
        description="Durable AI coding-agent sessions: serve them over HTTP, or prompt one here.",
        epilog=_ENVIRONMENT,
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"kittiwake {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, description: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help_text, description=description or help_text, epilog=_ENVIRONMENT,
            formatter_class=fmt,
        )  # fmt: skip

    attach_help = (
        "URL of a running `kittiwake serve` to talk to (default: the one holding the data dir, "
        "if any; else the data dir is opened here)"
    )
    serve = command("serve", "serve the HTTP API (OpenCode V2 routes) until Ctrl-C or SIGTERM")
    _add_serve_options(serve)
    serve.set_defaults(open_browser=None)  # web: True, or False with --no-open
    web = command(
        "web", "serve, and open the web app in the browser",
        "Serve as `serve` does (same options; one process, no --workers) and open the web app "
        "(the server's /) with the desktop's browser (Python's webbrowser, which honours "
        "$BROWSER). When a serve already holds the data dir, open that one's page instead.",
    )  # fmt: skip
    _add_serve_options(web)
    web.add_argument(
        "--no-open", dest="open_browser", action="store_false",
        help="serve and print the URL without opening a browser",
    )  # fmt: skip
    web.set_defaults(open_browser=True)
    run = command(
        "run", "prompt a session once and print the answer as it streams",
        "Prompt a new session (or --session ID, or --continue) and print the answer as it "
        "streams: text on standard output, tool calls and their outcomes on standard error. "
        "Permission requests are asked on the terminal (rejected when there is none). "
        "Ctrl-C interrupts the session and exits 130.",
    )  # fmt: skip
    run.add_argument(
        "prompt", nargs="*", help="the prompt; standard input is added when it is a pipe or a "
        "file (read to its end; pass </dev/null to skip it)",
    )  # fmt: skip
    run.add_argument("--model", metavar="PROVIDER/MODEL", help="the model for this prompt on")
    run.add_argument("--agent", help="the agent for this prompt on (e.g. build, plan)")
    run.add_argument(
        "--command", dest="run_command", metavar="NAME",
        help="run this command (.kittiwake/command/NAME.md, or init); the prompt words are "
        "its arguments",
    )  # fmt: skip
    which = run.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="prompt this session instead of a new one")
    which.add_argument(
        "--continue", "-c", dest="continue_latest", action="store_true",
        help="prompt the latest session of the current directory",
    )  # fmt: skip
    run.add_argument(
        "--format", choices=["default", "json"], default="default",
        help="json: every event (durable ones and deltas) as one JSON object per line",
    )  # fmt: skip
    tui = command(
        "tui", "OpenCode's terminal UI (opencode attach) on a Kittiwake server",
        "Run OpenCode's terminal UI (`opencode attach`, the npm package opencode-ai, found on "
        "PATH) against --attach URL, else the kittiwake serve that holds the data dir (the URL "
        "it recorded in <data dir>/serving.json), else a server started here on --port that "
        "stops when the UI exits. Exits with the UI's status; 1 when opencode is not on PATH.",
    )  # fmt: skip
    tui.add_argument(
        "--port", type=_port, default=0, help="port of a server started here (default 0: any)"
    )
    tui.add_argument("--hostname", default="127.0.0.1", help="address of a server started here")
    tui.add_argument(
        "--directory", help="the project directory the UI works in (default: the current one)"
    )
    tui_which = tui.add_mutually_exclusive_group()
    tui_which.add_argument("--session", metavar="ID", help="open this session")
    tui_which.add_argument(
        "--continue", "-c", dest="continue_latest", action="store_true",
        help="open the latest session",
    )  # fmt: skip
    acp = command(
        "acp", "serve the Agent Client Protocol on standard input and output (for editors)",
        "Serve the Agent Client Protocol (version 1: newline-delimited JSON-RPC) on standard "
        "input and output, for an editor that starts this command (Zed, JetBrains, Neovim "
        "clients): its sessions are Kittiwake's durable sessions. Logs go to standard error. "
        "It drives --attach URL, else the kittiwake serve holding the data dir, else the data "
        "dir opened here as serve opens it. See docs/acp.md.",
    )  # fmt: skip
    acp.add_argument(
        "--cwd", metavar="DIR", help="the directory whose configuration is read and where the "
        "command works (default: the current one); sessions work in the directory the editor "
        "names",
    )  # fmt: skip
    slack = command(
        "slack", "bring sessions into Slack threads (a Slack bot in Socket Mode)",
        "Connect to Slack in Socket Mode as a bot: a mention or a direct message starts a "
        "session, each thread is one session (kept across restarts), answers stream into one "
        "message, permission requests come as buttons, /kw new|list|attach|abort|model. Tokens "
        "from SLACK_BOT_TOKEN and SLACK_APP_TOKEN or kittiwake.json's slack section. It drives "
        "--attach URL, else the kittiwake serve holding the data dir, else the data dir opened "
        "here as serve opens it. See docs/slack.md.",
    )  # fmt: skip
    slack.add_argument(
        "--cwd", metavar="DIR", help="the directory whose configuration is read and where new "
        "sessions work unless slack.directory says otherwise (default: the current one)",
    )  # fmt: skip
    sessions = command(
        "sessions", "list, show, watch, resume, compact or delete sessions",
        "List sessions ([needs resume] marks those a crash cut short), show one, watch one "
        "(else the --limit newest), printing their durable events as they commit, until "
        "interrupted, resume one a crash cut short (exits 1 if it does not need it, or if "
        "the resumed run failed), compact one into a checkpoint, or delete one.",
    )  # fmt: skip
    sessions.add_argument(
        "action", choices=["list", "show", "watch", "resume", "compact", "delete"]
    )
    sessions.add_argument(
        "id", nargs="?", help="the session of show, watch, resume, compact and delete"
    )
    sessions.add_argument(
        "--format", choices=["default", "json"], default="default",
        help="watch: one line per event, ID SEQ TYPE (default) or its JSON",
    )  # fmt: skip
    sessions.add_argument("--limit", type=int, default=50, help="most sessions listed (50)")
    inspect = command("inspect", "print the actor tree")
    stats = command(
        "stats", "print turns, tokens, cost, errors and latency percentiles from telemetry"
    )
    stats.add_argument("--since", default="7d", help="period: 7d, 12h, 30m (default 7d)")
    stats.add_argument("--by", choices=["model", "session", "day"], default="model")
    trace = command("trace", "print the span tree of a session's last drains with durations")
    trace.add_argument("session", help="the session id")
    trace.add_argument("--drains", type=int, default=3, help="how many drains (default 3)")
    models = command(
        "models", "list the catalog's models; ✓ marks those whose provider has credentials"
    )
    models.add_argument("provider", nargs="?", help="only this provider's models")
    auth = command(
        "auth", "store, list or remove provider credentials (<data dir>/auth.json, mode 0600)",
        "login PROVIDER stores an API key, typed without echo or piped on standard input "
        "(github-copilot: a GitHub device login instead); list shows the stored credentials "
        "and the providers whose variables are set, never a secret; logout PROVIDER removes "
        "one.",
    )  # fmt: skip
    auth.add_argument("action", choices=["login", "list", "logout"])
    auth.add_argument("provider", nargs="?", help="the provider id (see kittiwake models)")
    auth.add_argument(
        "--enterprise-url", metavar="URL", help="github-copilot: a GitHub Enterprise server"
    )
    config = command(
        "config", "print the effective configuration, the source of every key, and diagnostics",
        "Print the configuration a session in the directory gets: the sources read (lowest "
        "precedence first: $XDG_CONFIG_HOME/kittiwake/kittiwake.json(c), $KITTIWAKE_CONFIG, "
        "the project's kittiwake.json(c) and .kittiwake/kittiwake.json(c) files from the git "
        "worktree root down, $KITTIWAKE_CONFIG_CONTENT), every key as SOURCE<TAB>key=value "
        "(API keys and header values redacted), then the keys that were ignored.",
    )  # fmt: skip
    config.add_argument("--directory", help="the directory (default: the current one)")
    mcp = command(
        "mcp", "add, list, sign in to, sign out of and debug MCP servers",
        "add NAME --url URL [--header K=V]... | add NAME [--env K=V]... -- COMMAND...: write "
        "the server into the project's configuration file (kittiwake.json(c) at the git "
        "worktree root; --global: the global one), comments kept. list: every configured "
        "server and its status (as GET /mcp answers). auth [NAME]: sign in to a remote "
        "server with OAuth: the authorization URL is printed and opened in a browser, and "
        "the sign-in waits for the browser to come back (5 minutes at most); auth list: the "
        "remote servers and their sign-in. logout [NAME]: forget a server's tokens and "
        "client. debug NAME: the initialize exchange, its WWW-Authenticate header, the "
        "stored tokens and where signing in would go. Sign-ins are kept in "
        "<data dir>/mcp-auth.json (mode 0600).",
    )  # fmt: skip
    mcp.add_argument("action", choices=["add", "list", "ls", "auth", "logout", "debug"])
    mcp.add_argument("name", nargs="?", help="the server (auth list: list the sign-ins)")
    mcp.add_argument("rest", nargs="*", metavar="COMMAND", help="add: a local server's command")
    mcp.add_argument("--url", help="add: the URL of a remote server")
    mcp.add_argument(
        "--header", action="append", default=[], metavar="KEY=VALUE",
        help="add: an HTTP header of a remote server (repeatable)",
    )  # fmt: skip
    mcp.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE",
        help="add: an environment variable of a local server (repeatable)",
    )  # fmt: skip
    mcp.add_argument(
        "--global", dest="scope", action="store_const", const="global", default="project",
        help="add: write the global configuration instead of the project's",
    )  # fmt: skip
    mcp.add_argument(
        "--no-browser", action="store_true", help="auth: print the URL, do not open a browser"
    )
    mcp.add_argument("--attach", metavar="URL", help="list: " + attach_help)
    plugin = command(
        "plugin", "list the plugins of the current directory, or install one",
        "list prints each plugin of the directory's Location (docs/plugins.md): its state "
        "(ready or failed, required or not), where it came from, the hooks it implements and "
        "its last error; exits 1 when a required one failed. add REQUIREMENT installs it with "
        "pip into Kittiwake's own environment (a name, name==version, or a path) and adds the "
        "distribution to the plugin list of the project's kittiwake.json (--global: of the "
        "global one).",
    )  # fmt: skip
    plugin.add_argument("action", choices=["list", "add"])
    plugin.add_argument("requirement", nargs="?", help="add: what pip installs")
    plugin.add_argument("--directory", help="the directory (default: the current one)")
    plugin.add_argument(
        "--global", dest="global_config", action="store_true",
        help="add: record the plugin in the global configuration file",
    )  # fmt: skip
    plugin.add_argument(
        "--pip-timeout", type=float, default=900.0, metavar="SECONDS",
        help="add: how long pip may take (default 900)",
    )  # fmt: skip
    export = command(
        "export", "write a session's durable events as JSON, or its transcript as Markdown",
        "Write SESSION and its subsessions as their stored durable events (JSON: each "
        "event's data byte for byte, what `kittiwake import` reads), or with --format "
        "markdown its transcript (prompts, answers, tool calls, tokens and cost).",
    )  # fmt: skip
    export.add_argument("session", help="the session id")
    export.add_argument("--format", choices=["json", "markdown"], default="json")
    export.add_argument("--output", "-o", metavar="FILE", help="write FILE (default: stdout)")
    imported = command(
        "import", "store an export's sessions in the data dir, every event as it was",
        "Store the sessions of FILE (written by `kittiwake export`) in the data dir, opened "
        "here: all of them or, when one exists already or the file is not an export, none.",
    )  # fmt: skip
    imported.add_argument("file", help="the export (JSON)")
    imported.add_argument("--data-dir", help=_DATA_DIR_HELP)
    github = command(
        "github", "answer a GitHub Actions event with one session (see docs/github.md)",
        "run: read GITHUB_EVENT_NAME and GITHUB_EVENT_PATH (issue_comment, "
        "pull_request_review_comment, issues, pull_request, workflow_dispatch, schedule); "
        "check the commenter's write permission, react, run one session in the current "
        "directory (the checkout) with the question tool denied, commit and push its changes "
        "(to the pull request's branch, or a new branch and pull request for an issue) and "
        "reply with the answer, the files changed, tokens and cost and the transcript. The "
        "token is GITHUB_TOKEN, the API GITHUB_API_URL; both tokens and provider keys leave "
        "the environment before the session runs.",
    )  # fmt: skip
    github.add_argument("action", choices=["run"])
    github.add_argument("--model", metavar="PROVIDER/MODEL", help="the session's model")
    github.add_argument("--agent", help="the session's agent (default: the configured one)")
    github.add_argument(
        "--prompt", help="the prompt, instead of the comment's text (needed for "
        "workflow_dispatch and schedule)",
    )  # fmt: skip
    github.add_argument(
        "--mentions", default=",".join(("/kittiwake", "/kw")), metavar="LIST",
        help="comma-separated words a comment must hold to be answered (default /kittiwake,/kw)",
    )  # fmt: skip
    github.add_argument(
        "--artifact-dir", metavar="DIR", help="write the session's export (SESSION.json) "
        "and transcript (SESSION.md) into DIR",
    )  # fmt: skip
    github.add_argument("--data-dir", help=_DATA_DIR_HELP)
    github.set_defaults(attach=None)
    token = command(
        "token", "create, list or revoke the bearer tokens of a team server",
        "create prints a new bearer token once (the store keeps only its hash): for --user, "
        "on --project ID (or * for every project), with --role read (list and stream), write "
        "(also prompt, reply, edit) or admin (also configuration, MCP, plugins, tokens), "
        "lasting --expires (30d, 12h, ...; default: until revoked). list shows them without "
        "secrets; revoke ID refuses one at once, on every worker (docs/security.md).",
    )  # fmt: skip
    token.add_argument("action", choices=["create", "list", "revoke"])
    token.add_argument("id", nargs="?", help="revoke: the token's id")
    token.add_argument("--user", help="create: whose token it is")
    token.add_argument("--project", help="create: the project id, or * for every project")
    token.add_argument("--role", choices=["read", "write", "admin"], help="create: its role")
    token.add_argument("--expires", metavar="DURATION", help="create: e.g. 30d, 12h, 15m")
    for cmd in (models, auth, config, mcp):
        cmd.add_argument("--data-dir", help=_DATA_DIR_HELP)
    for cmd in (run, tui, acp, slack, sessions, inspect, stats, trace, plugin, export, token):
        cmd.add_argument("--attach", metavar="URL", help=attach_help)
        cmd.add_argument("--data-dir", help=_DATA_DIR_HELP)
    return parser
