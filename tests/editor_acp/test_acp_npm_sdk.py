"""``kittiwake acp`` driven by ACP's TypeScript SDK (``@agentclientprotocol/sdk``, pinned in
clients/package.json and installed by ``make opencode``), as a Node editor would drive it."""

from __future__ import annotations

import json
import subprocess

from runtime.llm import ApiKeyCredential, CredentialStore
from tests.opencode.harness import Provider, calls, said

from .harness import ROOT, Setup, published
from .test_acp_durability import hangs_after

SDK = ROOT / "clients" / "node_modules" / "@agentclientprotocol" / "sdk"
SCRIPT = ROOT / "tests" / "editor_acp" / "sdk_client.mjs"
LIFECYCLE = ROOT / "tests" / "editor_acp" / "sdk_lifecycle.mjs"


def test_the_typescript_sdk_drives_a_session(tmp_path, provider: Provider) -> None:
    published()  # fails with the fix when the npm clients are not installed
    setup = Setup(tmp_path, provider)
    (setup.project / "kittiwake.json").write_text(json.dumps({"permission": {"edit": "ask"}}))
    notes = setup.project / "notes.txt"
    notes.write_text("v1\n")
    edit = {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}
    provider.server.queue(calls("edit", edit), said("Edited ", "it."), hangs_after("One, "))
    entry = SDK / "dist" / "v1" / "stable" / "acp.js"
    done = subprocess.run(
        ["node", str(SCRIPT), str(entry), str(setup.project), *setup.argv()],
        capture_output=True, text=True, timeout=120, env=setup.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["exitCode"] == 0, done.stderr
    assert seen["init"]["protocolVersion"] == 1
    sid = seen["created"]["sessionId"]
    assert seen["edited"]["stopReason"] == "end_turn"
    assert seen["cancelled"]["stopReason"] == "cancelled"
    assert notes.read_text() == "v2\n"
    [permission] = seen["permissions"]
    assert permission["sessionId"] == sid and permission["toolCall"]["title"] == "Edit notes.txt"
    kinds = [u["sessionUpdate"] for u in seen["live"]]
    assert {"available_commands_update", "tool_call", "tool_call_update"} <= set(kinds)
    text = "".join(
        u["content"]["text"] for u in seen["live"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text == "Edited it.One, "
    assert [s["sessionId"] for s in seen["listed"]["sessions"]] == [sid]
    users = [u["content"]["text"] for u in seen["replayed"]
             if u["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
    assert users == ["edit the notes", "count to a million"]


def test_a_session_is_deleted_and_logout_forgets_the_stored_credentials(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    del setup.env["LOCAL_API_KEY"]  # the provider's key is the stored one alone
    store = CredentialStore(setup.data)
    store.set("local", ApiKeyCredential(key="sk-local"))
    store.set("other", ApiKeyCredential(key="sk-other"))
    entry = SDK / "dist" / "v1" / "stable" / "acp.js"
    done = subprocess.run(
        ["node", str(LIFECYCLE), str(entry), str(setup.project), *setup.argv()],
        capture_output=True, text=True, timeout=120, env=setup.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["exitCode"] == 0, done.stderr
    capabilities = seen["init"]["agentCapabilities"]
    assert capabilities["sessionCapabilities"]["delete"] == {}
    assert capabilities["auth"] == {"logout": {}}
    assert seen["deleted"] == {"result": {}}
    kept = seen["kept"]["sessionId"]
    assert [s["sessionId"] for s in seen["listed"]["sessions"]] == [kept]
    assert seen["again"] == {"result": {}}  # the SDK takes -32002 as deleted already
    assert seen["logout"] == {"result": {}}
    assert CredentialStore(setup.data).load() == {}
    assert seen["after"]["error"]["code"] == -32000  # no provider has credentials now
    assert "kittiwake auth login" in seen["after"]["error"]["message"]
    listed = subprocess.run(
        [*setup.argv()[:-1], "sessions", "list"],
        capture_output=True, text=True, timeout=60, env=setup.env, check=True,
    )  # fmt: skip
    assert kept in listed.stdout and seen["gone"]["sessionId"] not in listed.stdout  # durable
