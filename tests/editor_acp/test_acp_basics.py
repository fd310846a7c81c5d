"""``kittiwake acp`` with the ACP SDK's client: initialize, a session, a streamed answer."""

from __future__ import annotations

import asyncio

from acp import PROTOCOL_VERSION, text_block
from acp import schema as S

from tests.opencode.harness import Provider, said

from .harness import Editor, Setup, agent, stderr_of


def test_initialize_new_session_and_a_streamed_answer(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(said("Hello ", "from ", "the mock."))

    async def scenario() -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:
            init = await acp.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=S.ClientCapabilities(),
                client_info=S.Implementation(name="test", version="1"),
            )
            assert init.protocol_version == 1
            caps = init.agent_capabilities
            assert caps.load_session is True
            assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
            assert caps.session_capabilities.list is not None
            assert caps.session_capabilities.fork is not None
            assert [m.id for m in init.auth_methods] == ["kittiwake-auth"]
            new = await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])
            sid = new.session_id
            assert sid.startswith("ses_")
            assert new.modes is not None and new.modes.current_mode_id == "build"
            assert {m.id for m in new.modes.available_modes} >= {"build", "plan"}
            options = {o.id: o for o in new.config_options}
            assert options["model"].current_value == "local/m1"
            await editor.until(lambda: "available_commands_update" in editor.kinds(sid))
            answer = await acp.conn.prompt(session_id=sid, prompt=[text_block("hi there")])
            assert answer.stop_reason == "end_turn"
            assert editor.text(session_id=sid) == "Hello from the mock."
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)

    asyncio.run(scenario())
