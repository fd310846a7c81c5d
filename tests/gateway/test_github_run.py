"""``kittiwake github run`` in real subprocesses: a local mock of GitHub's REST API that
records every call, a real git checkout with a bare "origin", and a local provider server
speaking OpenAI's chat-completions SSE as the scripted model."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
import trio

from gateway.github import GitHubOptions, Ran, github_run
from tests.gateway.test_cli_run import Cli, chunk, provider, said
from tests.llm.conftest import LocalServer, Recorded, Reply
from tests.llm.streams import sse

__all__ = ["provider"]  # the local provider server fixture

TOKEN = "ghs_TOKEN_SECRET_4711"
KEY = "sk-PROVIDER-SECRET-0815"
REPO = "octo/kite"


def calls(name: str, arguments: dict) -> Reply:
    call = {
        "index": 0, "id": f"call_{name}", "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }  # fmt: skip
    return Reply(chunks=[sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))])


def said_with_usage(text: str) -> Reply:
    """One provider answer with the tokens it spent (12 in, 5 out)."""
    usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}  # fmt: skip
    body = sse(
        chunk({"role": "assistant", "content": text}), chunk({}, finish="stop"), usage, done=True
    )
    return Reply(chunks=[body])


class GitHubMock(LocalServer):
    """GitHub's REST API as ``kittiwake github run`` uses it; ``calls`` holds every
    request as ``(METHOD, path)`` and ``requests`` the whole of each."""

    def __init__(self) -> None:
        super().__init__()
        self.writers = {"alice"}
        self.refuse_pulls = False
        self.responder = self.answer

    @property
    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]

    def posted(self, suffix: str) -> list[dict]:
        return [r.json() for r in self.requests if r.method == "POST" and r.path.endswith(suffix)]

    def answer(self, request: Recorded) -> Reply:
        path = request.path.removeprefix("/api/v3")
        parts = path.strip("/").split("/")
        if request.method == "GET" and parts[-1] == "permission":
            level = "write" if parts[-2] in self.writers else "read"
            return Reply(json_body={"permission": level, "user": {"login": parts[-2]}})
        if request.method == "POST" and parts[-1] == "reactions":
            return Reply(status=201, json_body={"id": 1, "content": "eyes"})
        if request.method == "GET" and path == f"/repos/{REPO}/pulls/7":
            head = {"ref": "feature", "repo": {"full_name": REPO}}
            return Reply(json_body={"number": 7, "head": head, "base": {"ref": "main"}})
        if request.method == "POST" and path == f"/repos/{REPO}/pulls":
            if self.refuse_pulls:
                return Reply(status=422, json_body={"message": "Validation Failed"})
            return Reply(status=201, json_body={"number": 8, "html_url": "https://example/pull/8"})
        if request.method == "POST" and parts[-1] in ("comments", "replies"):
            return Reply(status=201, json_body={"id": 99})
        return Reply(status=404, json_body={"message": "Not Found"})


@pytest.fixture
async def github(nursery: trio.Nursery) -> GitHubMock:
    srv = GitHubMock()
    listeners = await nursery.start(trio.serve_tcp, srv.handle, 0)
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


class Checkout:
    """A bare origin with ``main`` and ``feature``, cloned into the command's directory
    (on ``main``, as actions/checkout leaves an issue comment's run)."""

    def __init__(self, tmp: Path, work: Path) -> None:
        self.origin = tmp / "origin.git"
        self.work = work
        git(tmp, "init", "--quiet", "--bare", "--initial-branch=main", str(self.origin))
        git(tmp, "clone", "--quiet", str(self.origin), str(work))
        for key, value in (("user.name", "Test"), ("user.email", "test@example.com")):
            git(work, "config", key, value)
        (work / "README.md").write_text("# kite\n")
        git(work, "add", "README.md")
        git(work, "commit", "--quiet", "-m", "first")
        git(work, "push", "--quiet", "origin", "HEAD:main")
        git(work, "checkout", "--quiet", "-b", "feature")
        (work / "feature.txt").write_text("feature\n")
        git(work, "add", "feature.txt")
        git(work, "commit", "--quiet", "-m", "feature")
        git(work, "push", "--quiet", "origin", "feature")
        git(work, "checkout", "--quiet", "main")

    def branches(self) -> list[str]:
        out = git(self.origin, "for-each-ref", "--format=%(refname:short)", "refs/heads")
        return sorted(out.split())

    def show(self, ref: str, path: str) -> str:
        return git(self.origin, "show", f"{ref}:{path}")


class Event:
    """The command run as a GitHub Actions step would run it, with GitHub's variables."""

    def __init__(self, tmp: Path, provider: LocalServer, github: GitHubMock) -> None:
        self.tmp = tmp
        self.cli = Cli(tmp, provider)
        self.checkout = Checkout(tmp, self.cli.project)
        self.artifact = tmp / "artifact"
        self.cli.env.update({
            "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": f"{github.base_url}/api/v3", "GITHUB_TOKEN": TOKEN,
            "GITHUB_EVENT_PATH": str(tmp / "event.json"), "LOCAL_API_KEY": KEY,
        })  # fmt: skip

    async def __call__(
        self, name: str, payload: dict, *args: str
    ) -> subprocess.CompletedProcess[bytes]:
        payload = {"repository": {"full_name": REPO, "default_branch": "main"}, **payload}
        (self.tmp / "event.json").write_text(json.dumps(payload))
        self.cli.env["GITHUB_EVENT_NAME"] = name
        return await self.cli(
            "github", "run", "--model", "local/m1", "--artifact-dir", str(self.artifact), *args
        )

    def leaked(self) -> list[str]:
        """Files of the data dir and the artifact that hold the token or the key."""
        found = []
        for folder in (self.cli.data, self.artifact):
            for path in folder.rglob("*"):
                if path.is_file() and (
                    TOKEN.encode() in path.read_bytes() or KEY.encode() in path.read_bytes()
                ):
                    found.append(str(path))
        return found


def issue_comment(body: str, login: str = "alice") -> dict:
    return {
        "issue": {"number": 5, "title": "Say hello", "body": "We need a greeting."},
        "comment": {"id": 501, "body": body, "user": {"login": login}},
        "sender": {"login": login},
    }


async def test_issue_comment_opens_a_pull_request(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    provider.queue(
        calls("write", {"filePath": "hello.txt", "content": "hello from kittiwake\n"}),
        calls("shell", {"command": "env", "description": "show the environment"}),
        said("I added hello.txt."),
    )
    done = await event("issue_comment", issue_comment("/kittiwake please add a greeting file"))
    assert done.returncode == 0, done.stderr.decode()

    permission, reaction, pull, reply = github.calls
    assert permission == ("GET", f"/api/v3/repos/{REPO}/collaborators/alice/permission")
    assert reaction == ("POST", f"/api/v3/repos/{REPO}/issues/comments/501/reactions")
    assert pull == ("POST", f"/api/v3/repos/{REPO}/pulls")
    assert reply == ("POST", f"/api/v3/repos/{REPO}/issues/5/comments")
    assert {r.headers["authorization"] for r in github.requests} == {f"Bearer {TOKEN}"}
    opened = github.posted("/pulls")[0]
    branch = opened["head"]
    assert branch.startswith("kittiwake/issue-5-") and opened["base"] == "main"
    assert "Closes #5" in opened["body"]
    assert event.checkout.branches() == sorted(["feature", "main", branch])
    assert event.checkout.show(branch, "hello.txt") == "hello from kittiwake\n"

    body = github.posted("/issues/5/comments")[0]["body"]
    assert body.startswith("I added hello.txt.")
    assert "- `hello.txt`" in body and "in #8" in body and "tokens in" in body
    assert "<details><summary>Transcript</summary>" in body
    prompt = provider.requests[0].json()
    asked = [m["content"] for m in prompt["messages"] if m["role"] == "user"][0]
    assert "please add a greeting file" in str(asked) and "/kittiwake" not in str(asked)
    assert "Say hello" in str(asked)
    offered = [tool["function"]["name"] for tool in prompt["tools"]]
    assert "shell" in offered and "question" not in offered  # nobody answers in CI
    assert provider.requests[0].headers["authorization"] == f"Bearer {KEY}"

    shown = [m for m in provider.requests[2].json()["messages"] if m["role"] == "tool"][-1]
    assert "KITTIWAKE_DATA_DIR=" in str(shown["content"])  # the shell's environment ran
    assert TOKEN not in json.dumps(provider.requests[2].json())
    assert KEY not in json.dumps(provider.requests[2].json())
    assert TOKEN not in body and KEY not in body
    exports = sorted(event.artifact.glob("ses_*.json"))
    assert len(exports) == 1 and exports[0].with_suffix(".md").exists()
    assert "env" in exports[0].read_text()
    assert event.leaked() == []


async def test_review_comment_commits_on_the_pull_requests_branch(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    provider.queue(
        calls("write", {"filePath": "README.md", "content": "# kite\n\nA kite flies.\n"}),
        said_with_usage("README.md now says what a kite does."),
    )
    payload = {
        "pull_request": {
            "number": 7, "title": "Feature", "body": "",
            "head": {"ref": "feature", "repo": {"full_name": REPO}}, "base": {"ref": "main"},
        },
        "comment": {
            "id": 702, "body": "/kw say what a kite does", "user": {"login": "alice"},
            "path": "README.md", "line": 1, "diff_hunk": "@@ -0,0 +1 @@\n+# kite",
        },
        "sender": {"login": "alice"},
    }  # fmt: skip
    done = await event("pull_request_review_comment", payload)
    assert done.returncode == 0, done.stderr.decode()
    assert github.calls == [
        ("GET", f"/api/v3/repos/{REPO}/collaborators/alice/permission"),
        ("POST", f"/api/v3/repos/{REPO}/pulls/comments/702/reactions"),
        ("POST", f"/api/v3/repos/{REPO}/pulls/7/comments/702/replies"),
    ]
    assert event.checkout.branches() == ["feature", "main"]
    assert event.checkout.show("feature", "README.md") == "# kite\n\nA kite flies.\n"
    assert event.checkout.show("feature", "feature.txt") == "feature\n"  # on the PR's branch
    assert event.checkout.show("main", "README.md") == "# kite\n"
    body = github.posted("/replies")[0]["body"]
    assert "- `README.md`" in body and "pushed to `feature`" in body
    assert "12 tokens in, 5 out (cache 0), cost $0.0000" in body
    asked = str(provider.requests[0].json()["messages"])
    assert "The comment is on README.md:1." in asked and "+# kite" in asked


async def answered_here(
    tmp_path, github, name: str, payload: dict, prompt: str | None = None
) -> tuple[int, str]:
    """``github_run`` in this process on an event no session may answer; its exit status
    and log."""
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"repository": {"full_name": REPO, "default_branch": "main"}, **payload})
    )
    environ = {
        "GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": f"{github.base_url}/api/v3", "GITHUB_TOKEN": TOKEN,
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-secret",
    }  # fmt: skip

    async def run_session(prompt: str) -> Ran:
        raise AssertionError(f"no session may run: {prompt}")

    log = io.StringIO()
    options = GitHubOptions(directory=str(tmp_path), prompt=prompt)
    status = await github_run(environ, options, run_session, log=log)
    assert "GITHUB_TOKEN" not in environ  # taken out first, whatever happens next
    assert "ACTIONS_ID_TOKEN_REQUEST_TOKEN" not in environ
    return status, log.getvalue()


async def test_a_commenter_without_write_permission_is_refused(tmp_path, github):
    status, log = await answered_here(
        tmp_path, github, "issue_comment", issue_comment("/kittiwake delete everything", "mallory")
    )
    assert status == 1
    assert "@mallory needs write permission" in log
    assert github.calls == [
        ("GET", f"/api/v3/repos/{REPO}/collaborators/mallory/permission"),
        ("POST", f"/api/v3/repos/{REPO}/issues/5/comments"),
    ]
    assert "nothing was run" in github.posted("/comments")[0]["body"]


async def test_a_comment_without_the_mention_is_left_alone(tmp_path, github):
    status, log = await answered_here(
        tmp_path, github, "issue_comment", issue_comment("kittiwake is a bird")
    )
    assert status == 0
    assert "does not mention /kittiwake, /kw; nothing to do" in log
    assert github.requests == []


async def test_the_prompt_input_still_needs_the_mention_in_a_comment(tmp_path, github):
    payload = issue_comment("nice work")
    status, log = await answered_here(tmp_path, github, "issue_comment", payload, "review it")
    assert status == 0 and "the comment does not mention" in log
    assert github.requests == []


async def test_a_dispatch_without_a_prompt_is_refused(tmp_path, github):
    status, log = await answered_here(tmp_path, github, "workflow_dispatch", {})
    assert status == 1
    assert "the workflow_dispatch event needs the prompt input" in log
    assert github.requests == []


async def test_an_unhandled_event_is_refused(tmp_path, github):
    status, log = await answered_here(tmp_path, github, "push", {})
    assert status == 1 and "the event push is not one kittiwake github run handles" in log
    assert github.requests == []


async def test_a_pull_request_that_cannot_be_opened_leaves_no_branch(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    github.refuse_pulls = True
    provider.queue(calls("write", {"filePath": "a.txt", "content": "a\n"}), said("added a.txt"))
    done = await event("issue_comment", issue_comment("/kw add a.txt"))
    assert done.returncode == 1
    assert event.checkout.branches() == ["feature", "main"]  # pushed, then deleted again
    body = github.posted("/issues/5/comments")[-1]["body"]
    assert "could not be opened, so the branch was deleted again" in body
    assert "Validation Failed" in body


async def test_a_failed_push_is_replied(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    hook = event.checkout.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are closed' >&2\nexit 1\n")
    hook.chmod(0o755)
    provider.queue(calls("write", {"filePath": "a.txt", "content": "a\n"}), said("added a.txt"))
    done = await event("issue_comment", issue_comment("/kw add a.txt"))
    assert done.returncode == 1
    assert "not pushed" in done.stderr.decode()
    assert ("POST", f"/api/v3/repos/{REPO}/pulls") not in github.calls
    body = github.posted("/issues/5/comments")[-1]["body"]
    assert "Kittiwake could not finish" in body and "not pushed" in body


async def test_a_missing_provider_key_is_replied(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    del event.cli.env["LOCAL_API_KEY"]
    done = await event("issue_comment", issue_comment("/kw add a.txt"))
    assert done.returncode == 1
    body = github.posted("/issues/5/comments")[-1]["body"]
    assert "Kittiwake could not finish" in body and "LOCAL_API_KEY" in body
    assert provider.requests == [] and event.checkout.branches() == ["feature", "main"]


async def test_a_dispatch_runs_its_prompt_and_opens_a_pull_request(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    summary = tmp_path / "summary.md"
    event.cli.env["GITHUB_STEP_SUMMARY"] = str(summary)
    provider.queue(calls("write", {"filePath": "b.txt", "content": "b\n"}), said("added b.txt"))
    done = await event("workflow_dispatch", {"sender": {"login": "alice"}}, "--prompt", "add b.txt")
    assert done.returncode == 0, done.stderr.decode()
    assert github.calls == [("POST", f"/api/v3/repos/{REPO}/pulls")]  # nowhere to reply
    branch = github.posted("/pulls")[0]["head"]
    assert branch.startswith("kittiwake/workflow-dispatch-")
    assert event.checkout.show(branch, "b.txt") == "b\n"
    assert "added b.txt" in done.stderr.decode() and "- `b.txt`" in summary.read_text()


async def test_a_comment_on_a_pull_request_commits_on_its_branch(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    provider.queue(calls("write", {"filePath": "fix.txt", "content": "fixed\n"}), said("Fixed."))
    payload = issue_comment("/kittiwake fix it")
    payload["issue"] = {"number": 7, "title": "Feature", "body": "", "pull_request": {}}
    done = await event("issue_comment", payload)
    assert done.returncode == 0, done.stderr.decode()
    assert github.calls == [
        ("GET", f"/api/v3/repos/{REPO}/collaborators/alice/permission"),
        ("POST", f"/api/v3/repos/{REPO}/issues/comments/501/reactions"),
        ("GET", f"/api/v3/repos/{REPO}/pulls/7"),
        ("POST", f"/api/v3/repos/{REPO}/issues/7/comments"),
    ]
    assert event.checkout.show("feature", "fix.txt") == "fixed\n"
    assert event.checkout.branches() == ["feature", "main"]
    assert "pushed to `feature`" in github.posted("/issues/7/comments")[0]["body"]


async def test_a_failed_run_is_replied_and_its_changes_are_not_kept(tmp_path, provider, github):
    event = Event(tmp_path, provider, github)
    provider.queue(
        calls("write", {"filePath": "half.txt", "content": "half\n"}),
        Reply(status=400, json_body={"error": {"message": "model m1 is gone"}}),
    )
    payload = {
        "pull_request": {
            "number": 7, "title": "Feature", "body": "",
            "head": {"ref": "feature", "repo": {"full_name": REPO}}, "base": {"ref": "main"},
        },
        "sender": {"login": "alice"},
    }  # fmt: skip
    done = await event("pull_request", payload, "--prompt", "review this")
    assert done.returncode == 1
    assert "failed" in done.stderr.decode() and "model m1 is gone" in done.stderr.decode()
    assert github.calls[:2] == [
        ("GET", f"/api/v3/repos/{REPO}/collaborators/alice/permission"),
        ("POST", f"/api/v3/repos/{REPO}/issues/7/reactions"),
    ]
    body = github.posted("/issues/7/comments")[-1]["body"]
    assert "**The run failed:**" in body and "model m1 is gone" in body
    assert "its changes were not committed" in body and "- `half.txt`" in body
    assert event.checkout.show("feature", "feature.txt") == "feature\n"
    assert "half.txt" not in git(event.checkout.origin, "ls-tree", "--name-only", "feature")
    assert event.checkout.branches() == ["feature", "main"]
    assert str(provider.requests[0].json()["messages"]).count("review this") == 1
