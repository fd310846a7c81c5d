"""``kittiwake run``: one prompt to a session over the HTTP API, its answer on the terminal.

The answer's text is printed as its deltas arrive (``GET /api/event``, which also carries the
permission requests to answer); the durable events come from ``GET /api/session/{id}/event``
after the prompt's admission, so none is missed, and the run ends when ``POST
/api/session/{id}/wait`` returns, after a last read of the session's history. Text goes to
standard output, tool calls and their outcomes to standard error (so the answer can be piped):
a file tool's diff (from its result; a new file's from its content) and the language server
errors in the files it touched follow its ``✓`` line.
``--format json`` writes every event as one JSON line instead, in the order the session wrote
them: a delta is published as it streams, before the durable events that open its part
(``text.started``...) are stored, so it waits for that event; one arriving after its part's
end is left out (the end holds the whole part).

``kittiwake sessions resume`` follows the resumed run the same way, its durable events from
the session's last one before the resume on.
"""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TextIO

import msgspec
import trio

from gateway.cli._printer import NEXT, Printer

if TYPE_CHECKING:
    import httpx

__all__ = [
    "RunFailed",
    "RunOptions",
    "Runner",
    "admission_body",
    "check",
    "read_prompt",
    "watch_sessions",
]

_ASKED: Final = "permission.v2.asked"
_QUESTION: Final = "question.v2.asked"
_REPLIES: Final = {"o": "once", "once": "once", "a": "always", "always": "always"}
_INTERRUPT_GRACE: Final = 10.0
_SESSION_PAGE: Final = 100
_HISTORY_PAGE: Final = 1000
"""Events per ``/history`` request when looking for a session's last one (the route's most)."""


class RunFailed(Exception):
    """A client command that cannot go on (a refused request, an unknown session): the
    message is its one line for the terminal."""


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What ``kittiwake run`` was asked to do."""

    text: str
    directory: str
    format: str = "default"
    session: str | None = None
    continue_latest: bool = False
    model: str | None = None
    agent: str | None = None
    command: str | None = None
    """A command to run, ``text`` being its arguments, instead of a prompt."""
    again: tuple[str, ...] = ()
    """The options that reach this run's server again (``--attach URL``, ``--data-dir DIR``
    as given), repeated in the command an interrupted run suggests."""
    password: str | None = None
    """The server's basic auth password, for the websocket the durable events come over."""


async def watch_sessions(
    api: httpx.AsyncClient, ids: list[str], *, password: str | None, as_json: bool,
    out: TextIO = sys.stdout,
) -> None:  # fmt: skip
    """``kittiwake sessions watch``: one line per durable event of the sessions *ids*
    (``ID SEQ TYPE``, or ``{"sessionID", "event"}`` *as_json*) over one websocket
    (``kittiwake_sdk.Watcher``: a dropped connection resumes by seq), until cancelled.

    Raises:
        RunFailed: the server refused a subscription (an unknown session).
    """
    from kittiwake_sdk import KittiwakeError, Watcher

    authorization = api.headers.get("Authorization")
    watcher = Watcher(str(api.base_url), ids, password=password, authorization=authorization)
    try:
        async with watcher.open() as events:
            async for item in events:
                if as_json:
                    body = {"sessionID": item.session_id, "event": item.event}
                    line = msgspec.json.encode(body).decode()
                else:
                    line = f"{item.session_id} {item.event.seq} {item.event.type}"
                print(line, file=out, flush=True)
    except KittiwakeError as refused:
        raise RunFailed(str(refused)) from None


def admission_body(text: str, command: str | None) -> bytes:
    """The JSON body that admits *text* as a prompt, or runs *command* with *text* as its
    arguments: what ``kittiwake run`` sends, and what its size is checked on."""
    if command is not None:
        return msgspec.json.encode({"command": command, "arguments": text})
    return msgspec.json.encode({"prompt": {"text": text}})


def read_prompt(words: list[str], stdin: TextIO) -> str:
    """The prompt: the words, then standard input when it is a pipe or a file (not a terminal).

    Reading standard input blocks until it ends; pass ``</dev/null`` to skip it.
    """
    text = " ".join(words)
    if not stdin.isatty():
        try:
            piped = stdin.read()
        except (OSError, ValueError):  # closed or unreadable: there is nothing piped
            piped = ""
        if piped.strip():
            text = f"{text}\n{piped}" if text.strip() else piped
    return text.strip()


def model_body(ref: str) -> dict[str, str]:
    """``provider/model`` as the wire's ``ModelRef``; raises ``RunFailed`` when malformed."""
    provider, _, model = ref.partition("/")
    if not provider or not model:
        raise RunFailed(f"--model takes provider/model, got {ref!r}")
    return {"id": model, "providerID": provider}


def check(response: httpx.Response) -> Any:
    """The response's JSON (``None`` when empty); an error answer raises ``RunFailed``."""
    if response.status_code >= 400:
        try:
            body = response.json()
            message = f"{body.get('_tag')}: {body.get('message')}"
        except ValueError:
            message = response.text
        raise RunFailed(f"{response.request.method} {response.url.path}: {message}")
    return response.json() if response.content else None


def _terminal() -> tuple[TextIO, TextIO] | None:
    """Where to ask a question: standard input when it is a terminal, else ``/dev/tty``."""
    if sys.stdin.isatty():
        return sys.stdin, sys.stderr
    try:
        tty = open("/dev/tty", "r+")  # noqa: SIM115 - kept open for the run's questions
    except OSError:
        return None
    return tty, tty


class Runner:
    """One ``kittiwake run`` against *api* (an attached server, or one served in-process).

    ``terminal`` finds where permission questions are asked (``None``: nowhere, and they
    are rejected).
    """

    def __init__(
        self, api: httpx.AsyncClient, options: RunOptions, *,
        out: TextIO = sys.stdout, err: TextIO = sys.stderr,
        terminal: Callable[[], tuple[TextIO, TextIO] | None] = _terminal,
    ) -> None:  # fmt: skip
        self.api = api
        self.options = options
        self.printer = Printer(out, err, as_json=options.format == "json")
        self.err = err
        self._terminal = terminal
        self.session_id: str | None = None
        self.interrupted = False
        self._created = False
        self._family: set[str] = set()
        """The run's session and its descendants (subagent tasks), whose requests it answers."""

    async def run(self) -> int:
        """Prompt the session and follow it until idle; returns the exit status.

        0 when the answer finished, 1 when a step failed (the reason is printed) or the
        session stopped with work left, 130 after SIGINT (the session is interrupted first).

        Raises:
            RunFailed: the session could not be found, created or prompted.
        """
        sid = self.session_id = await self._session()
        self._family.add(sid)
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._on_signals, signals, nursery.cancel_scope)
                await self._listen(sid, nursery)
                receipt = check(await self._admit(sid))
                await self._follow(sid, receipt["data"]["admittedSeq"], nursery)
        return self._finish(sid)

    async def resume(self) -> None:
        """Resume ``options.session`` (a session a crash cut short) and follow its run until
        it is idle, as ``run`` follows a prompt (from the session's last durable event before
        the resume on): its progress printed, its permission requests and questions asked on
        the terminal. The run's outcome is the caller's to read.

        Raises:
            RunFailed: the session is unknown, or does not need a resume.
        """
        sid = self.session_id = self.options.session
        if sid is None:
            raise RunFailed("resume needs a session id")
        self._family.add(sid)
        async with trio.open_nursery() as nursery:
            await self._listen(sid, nursery)
            after = await self._last_seq(sid)
            self.printer.note(f"kittiwake: resuming {sid}; following its run until it is idle")
            check(await self.api.post(f"/api/session/{sid}/resume"))
            await self._follow(sid, after, nursery)

    async def _follow(self, sid: str, after: int, nursery: trio.Nursery) -> None:
        """Print *sid*'s durable events after seq *after* until it is idle, then end the
        work in *nursery*."""
        self.printer.last_seq = max(self.printer.last_seq, after)
        nursery.start_soon(self._durable, sid, after)
        check(await self.api.post(f"/api/session/{sid}/wait"))
        await self._catch_up(sid)
        self.printer.release_all()
        nursery.cancel_scope.cancel()

    async def _last_seq(self, sid: str) -> int:
        """The seq of *sid*'s last ``session.next.*`` event (-1 for none)."""
        last = -1
        while True:
            params = {"after": last, "limit": _HISTORY_PAGE}
            page = check(await self.api.get(f"/api/session/{sid}/history", params=params))
            if page["data"]:
                last = page["data"][-1]["durable"]["seq"]
            if not page["hasMore"]:
                return last

    async def _listen(self, sid: str, nursery: trio.Nursery) -> None:
        """Follow ``/api/event`` in *nursery* from now on, and answer the permission
        requests and questions *sid* already has open."""
        connected = trio.Event()
        nursery.start_soon(self._live, sid, connected, nursery)
        await connected.wait()
        for pending in check(await self.api.get(f"/api/session/{sid}/permission"))["data"]:
            nursery.start_soon(self._answer, sid, pending)
        for asked in check(await self.api.get(f"/api/session/{sid}/question"))["data"]:
            nursery.start_soon(self._question, asked)

    async def _admit(self, sid: str) -> httpx.Response:
        """Admit the run's prompt, or run its command with the text as arguments. A session
        this run created is deleted when the server refuses (4xx) its first prompt, so that
        a refusal leaves nothing behind; the refusal is the answer either way (the caller
        reports it), whatever the deletion answered."""
        opts = self.options
        path = "command" if opts.command is not None else "prompt"
        answer = await self.api.post(
            f"/api/session/{sid}/{path}", content=admission_body(opts.text, opts.command),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        if self._created and 400 <= answer.status_code < 500:
            await self.api.delete(f"/session/{sid}")
        return answer

    def _finish(self, sid: str) -> int:
        if self.interrupted:
            command = ["kittiwake", "run", *self.options.again, "--session", sid]
            again = f"{shlex.join(command)} PROMPT"
            print(f"kittiwake: interrupted session {sid}; continue with: {again}", file=self.err)
            return 130
        print(f"session {sid}", file=self.err)
        if self.printer.failure is not None:
            return 1
        if self.printer.last_finish == "tool-calls":
            print("kittiwake: the session stopped with tool calls unanswered", file=self.err)
            return 1
        return 0

    async def _session(self) -> str:
        opts = self.options
        if opts.session is not None or opts.continue_latest:
            sid = opts.session or await self._latest()
            check(await self.api.get(f"/api/session/{sid}"))
            if opts.agent is not None:
                check(await self.api.post(f"/api/session/{sid}/agent", json={"agent": opts.agent}))
            if opts.model is not None:
                body = {"model": model_body(opts.model)}
                check(await self.api.post(f"/api/session/{sid}/model", json=body))
            return sid
        create: dict[str, Any] = {"location": {"directory": opts.directory}}
        if opts.agent is not None:
            create["agent"] = opts.agent
        if opts.model is not None:
            create["model"] = model_body(opts.model)
        sid = str(check(await self.api.post("/api/session", json=create))["data"]["id"])
        self._created = True
        return sid

    async def _latest(self) -> str:
        """The newest top-level session whose directory is this run's."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": _SESSION_PAGE}
            if cursor is not None:
                params["cursor"] = cursor
            page = check(await self.api.get("/api/session", params=params))
            for info in page["data"]:
                here = info["location"]["directory"] == self.options.directory
                if here and not info.get("parentID"):
                    return str(info["id"])
            cursor = page["cursor"].get("next")
            if not cursor:
                raise RunFailed(f"no session in {self.options.directory} to continue")

    async def _live(self, sid: str, connected: trio.Event, nursery: trio.Nursery) -> None:
        """Deltas of *sid* from ``GET /api/event``; its permission requests are answered in
        *nursery*."""
        async with self.api.stream("GET", "/api/event") as stream:
            check_stream(stream)
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                body = msgspec.json.decode(line[6:])
                kind, props = body.get("type", ""), body.get("properties") or {}
                owner = props.get("sessionID")
                if kind == "server.connected":
                    connected.set()
                elif (
                    kind == "session.created"
                    and props.get("info", {}).get("parentID") in self._family
                ):
                    self._family.add(str(owner))  # a subagent's child session
                elif owner not in self._family:
                    continue
                elif kind.endswith(".delta") and kind.startswith(NEXT) and owner == sid:
                    self.printer.delta({"type": kind, "data": props})
                elif kind == _ASKED:
                    request = {"id": props.get("requestID"), **props}
                    nursery.start_soon(self._answer, str(owner), request)
                elif kind == _QUESTION:
                    nursery.start_soon(self._question, props)

    async def _durable(self, sid: str, after: int) -> None:
        """Print *sid*'s durable events after seq *after*, over the server's websocket
        (``kittiwake_sdk.Watcher``: a dropped connection is resumed from the last seq)."""
        from kittiwake_sdk import Watcher

        watcher = Watcher(
            str(self.api.base_url), [sid], password=self.options.password,
            authorization=self.api.headers.get("Authorization"),
        )  # fmt: skip
        watcher.last_seq[sid] = after
        async with watcher.open() as events:
            async for item in events:
                event = msgspec.to_builtins(item.event)
                self.printer.durable({k: v for k, v in event.items() if v is not None})

    async def _catch_up(self, sid: str) -> None:
        while True:
            page = check(
                await self.api.get(
                    f"/api/session/{sid}/history", params={"after": self.printer.last_seq}
                )
            )
            for event in page["data"]:
                self.printer.durable(event)
            if not page["hasMore"]:
                return

    async def _answer(self, sid: str, request: dict[str, Any]) -> None:
        """Ask the terminal about a permission request, or reject it when there is none."""
        self.printer.asked({"type": _ASKED, "data": request})
        request_id = request.get("id") or request.get("requestID")
        action = request.get("action") or request.get("permission") or "?"
        what = ", ".join(request.get("resources") or []) or "-"
        question = f"kittiwake: allow {action} {what}? [o]nce, [a]lways, [r]eject: "
        terminal = self._terminal()
        if terminal is None:
            self.printer.note(f"kittiwake: {action} {what} needs permission; no terminal, rejected")
            reply = "reject"
        else:
            reply = await trio.to_thread.run_sync(_ask, terminal, question, abandon_on_cancel=True)
        check(
            await self.api.post(
                f"/api/session/{sid}/permission/{request_id}/reply", json={"reply": reply}
            )
        )

    async def _question(self, asked: dict[str, Any]) -> None:
        """Ask the terminal each question of *asked* and send the answers, or reject the
        questions when there is no terminal."""
        self.printer.asked({"type": _QUESTION, "data": asked})
        sid, request_id = asked.get("sessionID"), asked.get("id")
        terminal = self._terminal()
        base = f"/api/session/{sid}/question/{request_id}"
        if terminal is None:
            self.printer.note("kittiwake: the model asks a question; no terminal, rejected")
            check(await self.api.post(f"{base}/reject"))
            return
        answers = []
        for info in asked.get("questions", []):
            answer = await trio.to_thread.run_sync(
                _ask_question, terminal, info, abandon_on_cancel=True
            )
            if answer is None:
                check(await self.api.post(f"{base}/reject"))
                return
            answers.append(answer)
        check(await self.api.post(f"{base}/reply", json={"answers": answers}))

    async def _on_signals(self, signals: Any, scope: trio.CancelScope) -> None:
        """First SIGINT: interrupt the session and let the run wind down (bounded by
        ``_INTERRUPT_GRACE``); a second one stops waiting at once."""
        async for _ in signals:
            if self.interrupted:
                scope.cancel()
                return
            self.interrupted = True
            self.printer.note("kittiwake: interrupting...")
            scope.deadline = trio.current_time() + _INTERRUPT_GRACE
            check(await self.api.post(f"/api/session/{self.session_id}/interrupt"))


def check_stream(response: httpx.Response) -> None:
    """Raise ``RunFailed`` when a streamed response is an error answer."""
    if response.status_code >= 400:
        raise RunFailed(f"GET {response.url.path}: HTTP {response.status_code}")


def _ask(terminal: tuple[TextIO, TextIO], question: str) -> str:
    reader, writer = terminal
    writer.write(question)
    writer.flush()
    answer = reader.readline().strip().lower()
    return _REPLIES.get(answer, "reject")


def _ask_question(terminal: tuple[TextIO, TextIO], info: dict[str, Any]) -> list[str] | None:
    """One question on the terminal: numbered options, several separated by commas when
    ``multiple``, or typed text unless ``custom`` is false; an empty line rejects (None)."""
    reader, writer = terminal
    options = [o.get("label", "") for o in info.get("options", [])]
    writer.write(f"kittiwake: [{info.get('header', '')}] {info.get('question', '')}\n")
    for number, option in enumerate(info.get("options", []), 1):
        writer.write(f"  {number}. {option.get('label', '')}: {option.get('description', '')}\n")
    many = " (several: 1,3)" if info.get("multiple") else ""
    typed = "" if info.get("custom") is False else " or type an answer"
    writer.write(f"choose a number{many}{typed}; empty line to dismiss: ")
    writer.flush()
    line = reader.readline().strip()
    if not line:
        return None
    picked = [p.strip() for p in line.split(",")] if info.get("multiple") else [line]
    if all(p.isdigit() and 1 <= int(p) <= len(options) for p in picked):
        return [options[int(p) - 1] for p in picked]
    return [line]
