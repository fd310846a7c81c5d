"""Many projects on one served runtime: two real git repositories registered through
``POST /project``, their sessions kept apart, and a token of one finding nothing of the
other's sessions, streams, files and lists."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from .conftest import assert_valid, response_schema, served
from .test_tokens import PW, bearer

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
]

GIT = [
    "git",
    "-c",
    "user.email=k@example.com",
    "-c",
    "user.name=k",
    "-c",
    "init.defaultBranch=main",
]


def make_repository(path: Path, text: str) -> str:
    """A git repository at *path* with one commit; its hash (the project's id)."""
    path.mkdir()
    (path / "README.md").write_text(text)
    for command in (["init", "-q"], ["add", "README.md"], ["commit", "-qm", "first"]):
        subprocess.run([*GIT, *command], cwd=path, check=True)
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True)
    return done.stdout.decode().strip()


async def repository(path: Path, text: str) -> str:
    return await trio.to_thread.run_sync(make_repository, path, text)


async def test_two_repositories_are_two_projects_with_their_own_sessions(tmp_path):
    a_commit = await repository(tmp_path / "a", "alpha\n")
    b_commit = await repository(tmp_path / "b", "beta\n")
    (tmp_path / "a" / "src").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    async with served(home) as g, httpx.AsyncClient(base_url=g.url, timeout=30) as client:
        r = await client.post("/project", json={"directory": str(tmp_path / "a")})
        assert r.status_code == 200, r.text
        assert_valid(r.json(), response_schema("/project/current", "get", 200))
        a = r.json()
        assert a["id"] == a_commit and a["worktree"] == str(tmp_path / "a") and a["vcs"] == "git"
        again = await client.post("/project", json={"worktree": str(tmp_path / "a" / "src")})
        assert again.json() == a  # the same project, registered once
        r = await client.post("/project/init", params={"directory": str(tmp_path / "b")})
        b = r.json()
        assert b["id"] == b_commit and b["time"]["initialized"] >= b["time"]["created"]
        listed = (await client.get("/project")).json()
        assert_valid(listed, response_schema("/project", "get", 200))
        assert {p["id"] for p in listed} >= {a_commit, b_commit}
        assert any(p["worktree"] == str(home.resolve()) for p in listed)  # the server's own

        r = await client.get("/project/current", params={"directory": str(tmp_path / "b")})
        assert r.json()["id"] == b_commit
        r = await client.get("/project/current", headers={"x-opencode-directory": str(tmp_path / "a" / "src")})  # fmt: skip
        assert r.json()["id"] == a_commit

        # Sessions go to the project of their directory, whichever route creates them.
        in_a = (await client.post(f"/project/{a_commit}/session", json={"directory": "src"})).json()
        assert in_a["projectID"] == a_commit
        assert in_a["directory"] == str(tmp_path / "a" / "src")
        v1_b = await client.post("/session", params={"directory": str(tmp_path / "b")}, json={})
        assert v1_b.json()["projectID"] == b_commit
        location = {"location": {"directory": str(tmp_path / "b")}}
        v2_b = (await client.post("/api/session", json=location)).json()["data"]
        assert v2_b["projectID"] == b_commit
        r = await client.post(f"/project/{a_commit}/session", json={"directory": str(tmp_path / "b")})  # fmt: skip
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"

        ids = [s["id"] for s in (await client.get(f"/project/{a_commit}/session")).json()]
        assert ids == [in_a["id"]]
        ids = [s["id"] for s in (await client.get(f"/project/{b_commit}/session")).json()]
        assert sorted(ids) == sorted([v1_b.json()["id"], v2_b["id"]])
        r = await client.get(f"/project/{a_commit}/session/{v2_b['id']}")
        assert r.status_code == 404  # B's session is not under A
        r = await client.get("/project/0000000000000000000000000000000000000000/session")
        assert r.status_code == 404 and r.json()["_tag"] == "NotFoundError"
        r = await client.get("/project/nope/directories")
        assert r.status_code == 404
        r = await client.get(f"/project/{a_commit}/directories")
        assert r.json() == [{"directory": str(tmp_path / "a")}]
        r = await client.post("/project", json={"directory": str(tmp_path / "missing")})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.post("/project", json={"path": "/"})
        assert r.status_code == 400

        # A registered project's files are served; a directory of no project's is not.
        r = await client.get("/file/content", params={"directory": str(tmp_path / "b"), "path": "README.md"})  # fmt: skip
        assert r.json()["content"] == "beta\n"
        r = await client.get("/file", params={"directory": str(tmp_path), "path": "."})
        assert r.status_code == 400


async def test_a_token_of_one_project_finds_nothing_of_another(tmp_path):
    a_commit = await repository(tmp_path / "a", "alpha\n")
    b_commit = await repository(tmp_path / "b", "beta\n")
    home = tmp_path / "home"
    home.mkdir()
    async with served(home, password="pw", tokens=True) as g:
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            for name in ("a", "b"):
                r = await client.post("/project", json={"directory": str(tmp_path / name)}, auth=PW)
                assert r.status_code == 200
            body = {"location": {"directory": str(tmp_path / "b")}}
            sid_b = (await client.post("/api/session", json=body, auth=PW)).json()["data"]["id"]
            tokens = {}
            for project in (a_commit, b_commit):
                r = await client.post(
                    "/api/token", json={"user": project[:6], "project": project, "role": "write"},
                    auth=PW,
                )  # fmt: skip
                tokens[project] = r.json()["data"]["token"]
            a, b = bearer(tokens[a_commit]), bearer(tokens[b_commit])

            # A's token creates in A, and never sees B's session, lists, stream or files.
            body = {"location": {"directory": str(tmp_path / "a")}}
            r = await client.post("/api/session", json=body, headers=a)
            assert r.status_code == 200, r.text
            sid_a = r.json()["data"]["id"]
            missing = (await client.get("/api/session/ses_missing", auth=PW)).json()
            r = await client.get(f"/api/session/{sid_b}", headers=a)
            assert r.status_code == 404
            assert r.json() == {k: str(v).replace("ses_missing", sid_b) for k, v in missing.items()}
            b_dir = {"directory": str(tmp_path / "b")}
            refused = [
                ("GET", f"/api/session/{sid_b}/event", None),
                ("POST", f"/api/session/{sid_b}/prompt", {"prompt": {"text": "hi"}}),
                ("GET", f"/session/{sid_b}", None),
                ("GET", f"/session/{sid_b}/message", None),
                ("POST", f"/session/{sid_b}/shell", {"agent": "build", "command": "ls"}),
                ("GET", f"/project/{b_commit}/session", None),
                ("GET", f"/project/{b_commit}/session/{sid_b}", None),
                ("GET", "/project/current", b_dir),
                ("GET", "/file/content", {**b_dir, "path": "README.md"}),
                ("GET", "/file", {**b_dir, "path": "."}),
                ("GET", "/config", b_dir),
                ("POST", "/project", {"directory": str(tmp_path / "b")}),
                ("POST", "/session", None),  # the server's own directory: not A's either
            ]
            for method, path, params in refused:
                if method == "GET":
                    r = await client.get(path, params=params, headers=a)
                else:
                    r = await client.post(path, json=params or {}, headers=a)
                assert r.status_code == 404, (path, r.text)
            r = await client.post("/session", params={"directory": str(tmp_path / "a")}, json={},
                                  headers=a)  # fmt: skip
            assert r.status_code == 200 and r.json()["projectID"] == a_commit
            sid_a2 = r.json()["id"]

            # Lists of every project show a token its own project's part.
            r = await client.get("/api/session", headers=a)
            assert {s["id"] for s in r.json()["data"]} == {sid_a, sid_a2}
            r = await client.get("/session", headers=a)
            assert {s["id"] for s in r.json()} == {sid_a, sid_a2}
            assert [p["id"] for p in (await client.get("/project", headers=a)).json()] == [a_commit]
            r = await client.get("/api/session", headers=b)
            assert [s["id"] for s in r.json()["data"]] == [sid_b]
            r = await client.get("/file/content", params={**b_dir, "path": "README.md"}, headers=b)
            assert r.json()["content"] == "beta\n"

            # The stream of every session carries only the token's project's events.
            got: list[dict] = []
            opened = trio.Event()

            async def read(token: dict[str, str]) -> None:
                async with client.stream("GET", "/api/event", headers=token) as r:
                    assert r.status_code == 200
                    async for line in r.aiter_lines():
                        opened.set()
                        if line.startswith("data: "):
                            got.append(json.loads(line[6:]))
                            if any(e.get("properties", {}).get("sessionID") == sid_a for e in got):
                                return

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read, a)
                    await opened.wait()
                    for sid in (sid_b, sid_a):  # B's first: A's marks the end
                        r = await client.post(
                            f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}},
                            auth=PW,
                        )  # fmt: skip
                        assert r.status_code == 200
            seen = {e.get("properties", {}).get("sessionID") for e in got} - {None}
            assert seen == {sid_a}

            # The websocket: B's session is absent for A's token.
            ws_url = g.url.replace("http://", "ws://") + "/api/ws"
            headers = [("Authorization", a["Authorization"])]
            async with open_websocket_url(ws_url, extra_headers=headers) as ws:
                for ref, sid in ((1, sid_b), (2, sid_a)):
                    frame = {"type": "subscribe", "ref": ref, "sessionID": sid}
                    await ws.send_message(json.dumps(frame))
                    with trio.fail_after(10):
                        while (reply := json.loads(await ws.get_message())).get("ref") != ref:
                            pass
                    if sid == sid_b:
                        assert reply["error"]["_tag"] == "SessionNotFoundError", reply
                    else:
                        assert "error" not in reply, reply


async def test_reads_register_no_project_and_a_created_session_does(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    places = [tmp_path / f"d{i}" for i in range(5)]
    for place in places:
        place.mkdir()
    async with served(home) as g, httpx.AsyncClient(base_url=g.url, timeout=30) as client:
        own = [p["id"] for p in (await client.get("/project")).json()]
        assert len(own) == 1  # the server's own directory, registered as it started
        (home / "sub" / "deeper").mkdir(parents=True)  # outside git, below it: its project
        r = await client.get("/project/current", params={"directory": str(home / "sub" / "deeper")})  # fmt: skip
        assert r.json()["id"] == own[0] and r.json()["worktree"] == str(home.resolve())
        r = await client.post("/api/session", json={"location": {"directory": str(home / "sub")}})
        assert r.json()["data"]["projectID"] == own[0]
        for place in places:  # every read naming a directory finds its project, writes none
            r = await client.get("/project/current", params={"directory": str(place)})
            assert r.status_code == 200 and r.json()["worktree"] == str(place)
            current = r.json()["id"]
            r = await client.get("/config", headers={"x-opencode-directory": str(place)})
            assert r.status_code == 200
            r = await client.get("/api/agent", params={"location[directory]": str(place)})
            assert r.json()["location"]["project"]["id"] == current
        assert [p["id"] for p in (await client.get("/project")).json()] == own
        r = await client.post("/session", params={"directory": str(places[0])}, json={})
        created = r.json()["projectID"]
        listed = [p["id"] for p in (await client.get("/project")).json()]
        assert listed == [created, *own]  # newest first
        r = await client.post("/api/session", json={"location": {"directory": str(places[0])}})
        assert r.json()["data"]["projectID"] == created
        assert [p["id"] for p in (await client.get("/project")).json()] == listed  # once
