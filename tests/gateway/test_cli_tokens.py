"""``kittiwake token`` in real subprocesses, and ``--attach`` clients sending a token."""

from __future__ import annotations

import os

import httpx

from .conftest import served
from .test_cli import kittiwake


async def test_token_create_list_revoke_and_attach_with_it(tmp_path):
    data = str(tmp_path / "data")
    env = {**os.environ, "KITTIWAKE_SERVER_PASSWORD": "", "KITTIWAKE_SERVER_TOKEN": ""}
    # No server holds the data dir: the command serves one for itself on it.
    made = await kittiwake(
        "token", "create", "--user", "alice", "--project", "*", "--role", "write",
        "--expires", "30d", "--data-dir", data, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr.decode()
    token = made.stdout.decode().strip()
    assert token.startswith("kwt_") and "shown only once" in made.stderr.decode()
    token_id = token.split("_")[1]
    bad = await kittiwake(
        "token", "create", "--user", "x", "--project", "*", "--role", "read",
        "--expires", "soon", "--data-dir", data, env=env,
    )  # fmt: skip
    assert bad.returncode == 1 and "not a duration" in bad.stderr.decode()

    async with served(tmp_path, tokens=True) as g:
        async with httpx.AsyncClient(base_url=g.url) as client:
            r = await client.get("/api/session", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200
        denied = await kittiwake("sessions", "list", "--attach", g.url, env=env)
        assert denied.returncode == 1 and "UnauthorizedError" in denied.stderr.decode()
        with_token = {**env, "KITTIWAKE_SERVER_TOKEN": token}
        listed = await kittiwake("sessions", "list", "--attach", g.url, env=with_token)
        assert listed.returncode == 0, listed.stderr.decode()
        # A write token is no admin: listing tokens is refused with the server's reason.
        tokens = await kittiwake("token", "list", "--attach", g.url, env=with_token)
        assert tokens.returncode == 1 and "needs admin" in tokens.stderr.decode()

    shown = await kittiwake("token", "list", "--data-dir", data, env=env)
    assert shown.returncode == 0, shown.stderr.decode()
    assert f"{token_id}  alice  *  write" in shown.stdout.decode()
    assert "active" in shown.stdout.decode() and token.split("_", 2)[2] not in shown.stdout.decode()
    revoked = await kittiwake("token", "revoke", token_id, "--data-dir", data, env=env)
    assert revoked.returncode == 0 and revoked.stdout.decode() == f"revoked {token_id}\n"
    shown = await kittiwake("token", "list", "--data-dir", data, env=env)
    assert "revoked" in shown.stdout.decode()
    async with served(tmp_path, tokens=True) as g:
        async with httpx.AsyncClient(base_url=g.url) as client:
            r = await client.get("/api/session", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 401
