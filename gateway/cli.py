"""The ``kittiwake`` command: ``serve``, ``run``, ``sessions`` and ``inspect``."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from runtime import ModelRef, open_runtime
from runtime import llm as llm_package
from storage import release_library_pages

if TYPE_CHECKING:
    import httpx

__all__ = ["default_data_dir", "main"]

_log = logging.getLogger("kittiwake.cli")
_FEATURED: Final = ("anthropic", "openai", "google", "openrouter", "github-copilot")
_TEXT_ENDED: Final = "session.next.text.ended"
_STEP_FAILED: Final = "session.next.step.failed"
_STEP_ENDED: Final = "session.next.step.ended"
_RELEASE_AFTER: Final = 0.25


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    """``$KITTIWAKE_DATA_DIR``, else ``$XDG_DATA_HOME/kittiwake``, else ``~/.local/share/kittiwake``."""
    environ = os.environ if env is None else env
    if environ.get("KITTIWAKE_DATA_DIR"):
        return Path(environ["KITTIWAKE_DATA_DIR"])
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kittiwake"


# -- provider discovery -------------------------------------------------------------------


class _Provider(msgspec.Struct, frozen=True):
    client: Any
    model: ModelRef
    http: httpx.AsyncClient
    catalog: Any

    def options(self) -> dict[str, Any]:
        """``open_runtime`` options: the default model and which model writes titles."""
        return {"default_model": self.model, "title_model": partial(_small_model, self.catalog)}


def _small_model(catalog: llm_package.Catalog, model: ModelRef) -> ModelRef | None:
    """The catalog's small model of *model*'s provider; None (no title) for a provider
    without one, such as an unpriced local server whose first answer a title request
    would compete with."""
    small = llm_package.choose_small_model(catalog, model.provider_id)
    return None if small is None else ModelRef(id=small.model_id, provider_id=small.provider_id)


async def _configured_provider(data_dir: Path, out: Any) -> _Provider | None:
    """A ProviderClient for ``KITTIWAKE_MODEL``, else the default model of the first provider
    with credentials (``llm.resolve_model``); else explain and return None.

    Raises:
        CatalogError: ``KITTIWAKE_MODEL`` names no known model, or one whose provider
            has no credentials.
    """
    try:
        catalog = await llm_package.load_catalog(cache_path=data_dir / "models-dev.json")
    except (llm_package.CatalogError, OSError) as exc:
        print(f"kittiwake: could not load the model catalog ({exc}); no provider", file=out)
        return None
    store = llm_package.CredentialStore(data_dir)
    try:
        stored = store.load()
    except llm_package.AuthError:
        stored = {}
    providers = catalog.providers
    credentialed = {
        p.id for p in providers.values() if p.id in stored or any(os.environ.get(n) for n in p.env)
    }
    ref = llm_package.resolve_model(catalog, credentialed, os.environ.get("KITTIWAKE_MODEL"))
    if ref is not None:
        http = llm_package.provider_http_client()
        auth = llm_package.Auth(env=dict(os.environ), store=store)
        client = llm_package.ProviderClient(catalog, auth, http_client=http)
        print(f"kittiwake: using provider {ref.provider_id}, model {ref.model_id}", file=out)
        model = ModelRef(id=ref.model_id, provider_id=ref.provider_id)
        return _Provider(client, model, http, catalog)
    looked = [providers[p] for p in _FEATURED if p in providers] or list(providers.values())[:5]
    print("kittiwake: no LLM provider is configured; prompts will fail until one is.", file=out)
    print("  Looked for credentials of these providers (and every other catalog entry):", file=out)
    for provider in looked:
        names = ", ".join(provider.env) or "(login)"
        print(f"    {provider.id:<16} {names}", file=out)
    print(f"  Set one of those variables, or store a credential in {store.path},", file=out)
    print("  optionally with KITTIWAKE_MODEL=provider/model, and restart.", file=out)
    return None


# -- commands -----------------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    password = os.environ.get("KITTIWAKE_SERVER_PASSWORD") or None
    cors = [o for o in os.environ.get("KITTIWAKE_CORS_ORIGINS", "").split(",") if o]
    provider: _Provider | None = None
    loaded = trio.Event()

    async def load_gateway() -> None:
        # The web framework's import is about a third of start-up; a worker thread runs
        # it while this thread finds the provider and opens the store (whose DuckDB work
        # runs outside the GIL). A failed import cancels start-up and raises.
        await trio.to_thread.run_sync(partial(import_module, "gateway._serve"))
        loaded.set()

    try:
        async with trio.open_nursery() as outer:
            outer.start_soon(load_gateway)
            try:
                provider = await _configured_provider(data_dir, sys.stderr)
            except llm_package.CatalogError as exc:
                print(f"kittiwake: {exc}", file=sys.stderr)
                return 2
            options: dict[str, Any] = provider.options() if provider is not None else {}
            async with open_runtime(
                data_dir=data_dir, llm=provider.client if provider else None, **options
            ) as rt:
                await loaded.wait()
                from gateway._serve import serve

                async with trio.open_nursery() as nursery:
                    server = await nursery.start(
                        lambda task_status: serve(
                            rt, args.hostname, args.port, password=password,
                            cors_origins=cors, task_status=task_status,
                        )
                    )  # fmt: skip
                    _end_startup(args)
                    housekeeping = trio.CancelScope()
                    nursery.start_soon(_release_library_pages_soon, housekeeping)
                    print(f"kittiwake: serving {server.url} (data in {data_dir})", flush=True)
                    if args.hostname not in ("127.0.0.1", "localhost", "::1") and not password:
                        print("kittiwake: warning: listening beyond localhost without a password")
                    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for signum in signals:
                            print(f"kittiwake: stopping on signal {signum}", file=sys.stderr)
                            housekeeping.cancel()
                            server.stop()
                            break
    finally:
        if provider is not None:
            await provider.http.aclose()
    return 0


@asynccontextmanager
async def _api(args: argparse.Namespace) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client to ``--attach`` or to a runtime served in this process on a free port."""
    import httpx

    password = os.environ.get("KITTIWAKE_SERVER_PASSWORD")
    auth = ("kittiwake", password) if password else None
    timeout = httpx.Timeout(30.0, read=None)
    if args.attach:
        async with httpx.AsyncClient(base_url=args.attach, auth=auth, timeout=timeout) as c:
            yield c
        return
    from gateway._serve import serve

    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    provider = await _configured_provider(data_dir, sys.stderr) if args.command == "run" else None
    options: dict[str, Any] = provider.options() if provider else {}
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
            await provider.http.aclose()


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
            message = f"{body.get('_tag')}: {body.get('message')}"
        except ValueError:
            message = response.text
        raise SystemExit(f"kittiwake: {response.request.method} {response.url.path}: {message}")
    return response.json() if response.content else None


async def _run(args: argparse.Namespace) -> int:
    """Create a session, prompt it, print the answer's text as it streams; 1 on a failed step."""
    text = " ".join(args.prompt)
    async with _api(args) as api:
        session = _check(
            await api.post("/api/session", json={"location": {"directory": os.getcwd()}})
        )
        sid = session["data"]["id"]
        after: int | None = None
        async with api.stream("GET", f"/api/session/{sid}/event") as events:
            receipt = _check(
                await api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
            )
            admitted = receipt["data"]["admittedSeq"]
            failed = False
            printed = False
            async for line in events.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = msgspec.json.decode(line[6:])
                seq = event["durable"]["seq"]
                if seq <= admitted or (after is not None and seq <= after):
                    continue
                after = seq
                kind, data = event["type"], event["data"]
                if kind == _TEXT_ENDED:
                    sys.stdout.write(data["text"])
                    sys.stdout.flush()
                    printed = True
                elif kind == _STEP_FAILED:
                    failed = True
                    print(f"kittiwake: step failed: {data['error']['message']}", file=sys.stderr)
                    break
                elif kind == _STEP_ENDED and data.get("finish") != "tool-calls":
                    break
        if printed:
            sys.stdout.write("\n")
        print(f"session {sid}", file=sys.stderr)
        return 1 if failed else 0


async def _sessions(args: argparse.Namespace) -> int:
    async with _api(args) as api:
        if args.action == "list":
            page = _check(await api.get("/api/session", params={"limit": args.limit}))
            for info in page["data"]:
                print(f"{info['id']}  {info['title']}  {info['location']['directory']}")
        elif args.action == "delete":
            project = _check(await api.get("/project/current"))["id"]
            _check(await api.delete(f"/project/{project}/session/{args.id}"))
            print(f"deleted {args.id}")
        else:
            info = _check(await api.get(f"/api/session/{args.id}"))["data"]
            print(msgspec.json.format(msgspec.json.encode(info)).decode())
            messages = _check(
                await api.get(
                    f"/api/session/{args.id}/message", params={"order": "asc", "limit": 200}
                )
            )
            for message in messages["data"]:
                print(f"--- {message['type']} {message['id']}")
                if "text" in message:
                    print(message["text"])
                for part in message.get("content", []):
                    if part.get("type") == "text":
                        print(part["text"])
                    elif part.get("type") == "tool":
                        print(f"[tool {part['name']}: {part['state']['status']}]")
    return 0


def render_tree(snapshot: dict[str, Any]) -> str:
    """The actor tree as indented text: state, mailbox depth, restarts, current activity."""
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        st = node.get("statistics", {})
        bound = st.get("mailbox_bound")
        mailbox = f"{st.get('mailbox_depth')}/{bound if bound is not None else 'inf'}"
        activity = st.get("current_activity") or "-"
        lines.append(
            f"{'  ' * depth}{st.get('id')} [{st.get('kind')}] {st.get('state')}"
            f"  mailbox={mailbox} restarts={st.get('restarts')} activity={activity}"
        )
        for child in node.get("children", []):
            walk(child, depth + 1)

    for root in snapshot.get("tree", []):
        walk(root, 0)
    storage = snapshot.get("storage", {})
    if storage:
        lines.append("storage: " + " ".join(f"{k}={v}" for k, v in storage.items()))
    return "\n".join(lines)


async def _inspect(args: argparse.Namespace) -> int:
    async with _api(args) as api:
        print(render_tree(_check(await api.get("/api/actors"))))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kittiwake", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the HTTP API (OpenCode V2 routes)")
    serve.add_argument("--port", type=int, default=4096)
    serve.add_argument("--hostname", default="127.0.0.1")
    serve.add_argument("--data-dir")
    for name, help_text in (
        ("run", "prompt a new session once and print the answer"),
        ("sessions", "list, show or delete sessions"),
        ("inspect", "print the actor tree"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--attach", help="URL of a running kittiwake server")
        cmd.add_argument("--data-dir")
        if name == "run":
            cmd.add_argument("prompt", nargs="+")
        if name == "sessions":
            cmd.add_argument("action", choices=["list", "show", "delete"])
            cmd.add_argument("id", nargs="?")
            cmd.add_argument("--limit", type=int, default=50)
    return parser


async def _release_library_pages_soon(scope: trio.CancelScope) -> None:
    """Once start-up's DuckDB work is done, unmap the library pages it alone used
    (``storage.release_library_pages``), ``_RELEASE_AFTER`` seconds after the server
    accepts: reading the process's memory map takes the GIL for tens of milliseconds,
    which the first requests should not wait behind. Cancelling *scope* before then
    skips it; once begun, it finishes (milliseconds)."""
    with scope:
        await trio.sleep(_RELEASE_AFTER)
        await trio.to_thread.run_sync(release_library_pages)


def _end_startup(args: argparse.Namespace) -> None:
    """Freeze what start-up built and resume the collector, if the launcher paused it.

    See ``gateway/__main__.py``: everything alive now lives as long as the process, so
    ``gc.freeze()`` keeps later collections from walking it. Runs once; later calls do nothing.
    """
    if args.collector_paused:
        args.collector_paused = False
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None, *, collector_paused: bool = False) -> int:
    """Run one ``kittiwake`` command; returns the exit status.

    ``collector_paused`` says the caller (``gateway/__main__.py``) paused the cyclic
    collector for start-up: ``serve`` resumes it once accepting, other commands at once.
    """
    args = _parser().parse_args(argv)
    args.collector_paused = collector_paused
    if args.command != "serve":
        _end_startup(args)
    logging.basicConfig(level=os.environ.get("KITTIWAKE_LOG", "WARNING").upper())
    if args.command == "sessions" and args.action in ("show", "delete") and not args.id:
        raise SystemExit(f"kittiwake: sessions {args.action} needs a session id")
    command = {"serve": _serve, "run": _run, "sessions": _sessions, "inspect": _inspect}
    try:
        return trio.run(command[args.command], args)
    except KeyboardInterrupt:
        return 130
    except llm_package.CatalogError as exc:  # KITTIWAKE_MODEL names no usable model
        print(f"kittiwake: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        # httpx is imported only by commands that talk HTTP; no other can raise its errors.
        httpx = sys.modules.get("httpx")
        if httpx is None or not isinstance(exc, httpx.HTTPError):
            raise
        print(f"kittiwake: cannot reach the server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
