"""``kittiwake github run``: one GitHub Actions event answered by one session.

The order is what keeps a refusal cheap and a failure whole: read the event; do nothing
without the mention; refuse (with a reply) a person without write permission; react; run
the session in the checkout (on the pull request's branch); then commit and push the
changes (to the pull request's branch, or to a new branch with a pull request opened for
it) and reply. A failure after the reaction is replied too, and the command exits 1; a
branch pushed whose pull request cannot be opened is deleted again, so nothing is left
without a comment saying why.

The GitHub token is taken out of the process's environment before anything runs, so no
session, tool or shell command sees it; it never reaches a prompt, a transcript or an
export.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Final, TextIO

import msgspec
import trio

from gateway.github._event import (
    DEFAULT_MENTIONS,
    EventError,
    Trigger,
    mentioned,
    prompt_of,
    read_trigger,
)
from gateway.github._git import GitError, changed_files, checkout_branch, commit_all, git, push
from gateway.github._rest import DEFAULT_API_URL, GitHub, GitHubError, open_github
from gateway.http import Usage, transcript, usage_of
from runtime import SessionInfo, SessionMessage
from runtime import messages as msg

__all__ = [
    "TOKEN_VARIABLES",
    "GitHubOptions",
    "Ran",
    "RunSession",
    "SessionFailed",
    "github_run",
    "reply_body",
]

TOKEN_VARIABLES: Final = ("GITHUB_TOKEN", "GH_TOKEN")
"""Where the token is read from; both leave the environment at once."""
_RUNNER_SECRETS: Final = ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_RUNTIME_TOKEN")
"""The runner's own tokens, when a step has them: they leave the environment too."""
MAX_COMMENT: Final = 60_000
"""Characters of a reply (GitHub takes 65,536); the transcript is cut to fit."""


class GitHubOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What the action's inputs say: the mentions a comment must hold, a prompt that
    replaces the comment's text (needed for ``workflow_dispatch`` and ``schedule``), the
    checkout, and where the session's export and transcript are written (None: not)."""

    directory: str
    mentions: tuple[str, ...] = DEFAULT_MENTIONS
    prompt: str | None = None
    artifact_dir: str | None = None
    summary: str | None = None
    """The step summary file the reply is added to (``GITHUB_STEP_SUMMARY``)."""


class Ran(msgspec.Struct, frozen=True, kw_only=True):
    """One session's outcome: its info and messages, its export (JSON), and the failure
    that ended it (None when it answered)."""

    info: SessionInfo
    messages: list[SessionMessage]
    export: bytes
    error: str | None = None


RunSession = Callable[[str], Awaitable[Ran]]
"""Run one session on the prompt in the checkout, following it until it is idle; raises
``SessionFailed`` when it cannot run at all."""


class SessionFailed(Exception):
    """The session could not be run (no provider key, an unknown model): the message says
    why. ``RunSession`` raises it."""


class _Refused(Exception):
    """The request is refused: the message is the reply."""


def _answer(messages: Sequence[SessionMessage]) -> str:
    """The text of the last answer."""
    for m in reversed(messages):
        if isinstance(m, msg.AssistantMessage):
            text = "\n\n".join(p.text for p in m.content if isinstance(p, msg.AssistantText))
            if text.strip():
                return text.strip()
    return "(no answer text)"


def reply_body(
    ran: Ran, *, files: Sequence[str], where: str | None, note: str | None = None,
    limit: int = MAX_COMMENT,
) -> str:  # fmt: skip
    """The reply: the answer, where the changes went and the files changed, the failure
    if any, tokens and cost, and the transcript folded in a ``<details>`` (cut to fit
    *limit* characters)."""
    usage: Usage = usage_of(ran.messages)
    lines = [_answer(ran.messages), ""]
    if ran.error:
        lines += [f"**The run failed:** {ran.error}", ""]
    if note:
        lines += [note, ""]
    if files:
        lines += [f"Files changed{f' ({where})' if where else ''}:", ""]
        lines += [f"- `{path}`" for path in files] + [""]
    lines += [f"Session `{ran.info.id}`: {usage.text()}"]
    head = "\n".join(lines)
    folded = transcript(ran.info, ran.messages)
    room = limit - len(head) - 200
    if len(folded) > room:
        folded = (
            folded[: max(room, 0)] + "\n\n... (cut; the whole transcript is in the run's artifact)"
        )
    ticks = "````"
    while ticks in folded:
        ticks += "`"
    return (
        f"{head}\n\n<details><summary>Transcript</summary>\n\n{ticks}markdown\n{folded}\n"
        f"{ticks}\n\n</details>\n"
    )


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(text)


def _write_artifact(options: GitHubOptions, ran: Ran) -> None:
    if options.artifact_dir is None:
        return
    folder = Path(options.artifact_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{ran.info.id}.json").write_bytes(ran.export + b"\n")
    (folder / f"{ran.info.id}.md").write_text(transcript(ran.info, ran.messages))


async def github_run(
    environ: MutableMapping[str, str], options: GitHubOptions, run_session: RunSession, *,
    log: TextIO,
) -> int:  # fmt: skip
    """Answer the event *environ* names (see the module docstring); the exit status: 0
    when it was answered or asked nothing (no mention), 1 when it was refused or failed
    (one line on *log* says why, and a reply when there is somewhere to reply).

    Takes the token out of *environ* first. Cancellation stops where it is: a branch may
    be pushed without its pull request then.
    """
    token = ""
    for name in TOKEN_VARIABLES:
        token = environ.pop(name, "") or token
    for name in _RUNNER_SECRETS:
        environ.pop(name, None)
    base = environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    if options.summary is None and environ.get("GITHUB_STEP_SUMMARY"):
        options = msgspec.structs.replace(options, summary=environ["GITHUB_STEP_SUMMARY"])
    try:
        trigger = read_trigger(environ)
    except EventError as exc:
        print(f"kittiwake: {exc}", file=log)
        return 1
    asked = options.prompt is not None or trigger.event in ("issues", "pull_request")
    if not asked and trigger.comment_id is None:
        print(f"kittiwake: the {trigger.event} event needs the prompt input", file=log)
        return 1
    # A comment is answered only when it asks (the prompt input replaces its text then);
    # an issue when it asks or the workflow gives the prompt.
    if trigger.comment_id is not None or (trigger.event == "issues" and options.prompt is None):
        if mentioned(trigger.text, options.mentions) is None:
            what = "comment" if trigger.comment_id is not None else "issue"
            mentions = ", ".join(options.mentions)
            print(f"kittiwake: the {what} does not mention {mentions}; nothing to do", file=log)
            return 0
    if not token:
        print("kittiwake: no GitHub token (GITHUB_TOKEN); nothing can be read or replied", file=log)
        return 1
    async with open_github(base, token, trigger.repository) as github:
        try:
            return await _answer_event(github, trigger, options, run_session, log)
        except GitHubError as exc:
            print(f"kittiwake: {exc}", file=log)
            return 1


async def _answer_event(
    github: GitHub, trigger: Trigger, options: GitHubOptions, run_session: RunSession,
    log: TextIO,
) -> int:  # fmt: skip
    if trigger.event in ("issue_comment", "pull_request_review_comment", "issues", "pull_request"):
        who = trigger.author or ""
        if not who or not await github.can_write(who):
            message = f"@{who} needs write permission on {trigger.repository} to ask Kittiwake; nothing was run."
            print(f"kittiwake: {message}", file=log)
            await github.reply(trigger, message)
            return 1
    await github.react(trigger)
    try:
        return await _session_and_changes(github, trigger, options, run_session, log)
    except (GitError, GitHubError, SessionFailed, _Refused) as exc:
        print(f"kittiwake: {exc}", file=log)
        await github.reply(trigger, f"**Kittiwake could not finish:** {exc}")
        return 1


async def _session_and_changes(
    github: GitHub, trigger: Trigger, options: GitHubOptions, run_session: RunSession,
    log: TextIO,
) -> int:  # fmt: skip
    cwd = options.directory
    branch: str | None = None
    own_branch = True
    if trigger.pull_request and trigger.number is not None:
        head = trigger.head_ref
        head_repository = trigger.head_repository
        if head is None:
            pull = await github.pull(trigger.number)
            head = pull["head"]["ref"]
            head_repository = (pull["head"].get("repo") or {}).get("full_name")
        own_branch = head_repository in (None, trigger.repository)
        if own_branch:
            branch = head
            await checkout_branch(cwd, head)
    ran = await run_session(prompt_of(trigger, options.mentions, options.prompt))
    try:
        await trio.to_thread.run_sync(_write_artifact, options, ran)
    except OSError as exc:  # the reply and the changes matter more than the artifact
        print(f"kittiwake: cannot write the artifact in {options.artifact_dir}: {exc}", file=log)
    files = await changed_files(cwd)
    where: str | None = None
    note: str | None = None
    if files and ran.error is None:
        subject = f"Kittiwake: {(trigger.title or options.prompt or trigger.event)[:60]}"
        if branch is not None:
            await commit_all(cwd, f"{subject}\n\nSession {ran.info.id}")
            try:
                await push(cwd, branch)
            except GitError as exc:
                raise _Refused(
                    f"the changes were committed but not pushed to {branch}: {exc}"
                ) from None
            where = f"pushed to `{branch}`"
        elif not own_branch:
            note = "The pull request comes from a fork: its branch cannot be pushed to, so the changes were not kept."
        else:
            where = await _open_pull(github, trigger, cwd, ran, subject)
    elif files:
        note = "The run failed, so its changes were not committed."
    body = reply_body(ran, files=files, where=where, note=note)
    await github.reply(trigger, body)
    if trigger.number is None:  # nowhere to reply: the log has it
        print(body, file=log)
    if options.summary is not None:
        await trio.to_thread.run_sync(_append, options.summary, body + "\n")
    if ran.error is not None:
        print(f"kittiwake: the session {ran.info.id} failed: {ran.error}", file=log)
        return 1
    return 0


async def _open_pull(github: GitHub, trigger: Trigger, cwd: str, ran: Ran, subject: str) -> str:
    """Commit on a new branch, push it and open a pull request for it; where the changes
    went. A branch whose pull request cannot be opened is deleted from origin again."""
    label = (
        f"issue-{trigger.number}" if trigger.number is not None else trigger.event.replace("_", "-")
    )
    branch = f"kittiwake/{label}-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}"
    await git(cwd, "checkout", "-b", branch)
    await commit_all(cwd, f"{subject}\n\nSession {ran.info.id}")
    try:
        await push(cwd, branch)
    except GitError as exc:
        raise _Refused(f"the changes were committed on {branch} but not pushed: {exc}") from None
    closes = (
        f"Closes #{trigger.number}\n\n"
        if trigger.number is not None and not trigger.pull_request
        else ""
    )
    try:
        pull = await github.open_pull(
            head=branch, base=trigger.default_branch, title=subject,
            body=f"{closes}{_answer(ran.messages)}\n\nSession `{ran.info.id}`",
        )  # fmt: skip
    except GitHubError as exc:
        try:
            await git(cwd, "push", "--quiet", "origin", "--delete", branch)
        except GitError as gone:
            raise _Refused(
                f"the pull request for {branch} could not be opened ({exc}), and the branch could not be deleted: {gone}"
            ) from None
        raise _Refused(
            f"the pull request for {branch} could not be opened, so the branch was deleted again: {exc}"
        ) from None
    return f"in #{pull.get('number')}, branch `{branch}`"
