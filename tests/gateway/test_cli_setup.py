"""``kittiwake auth`` and ``kittiwake models`` in real subprocesses."""

from __future__ import annotations

import json
import stat

from tests.llm.conftest import Reply

from .test_cli_run import Cli, catalog, provider  # noqa: F401 - the provider fixture


async def test_auth_login_list_logout_round_trip(tmp_path):
    cli = Cli(tmp_path, None)
    cli.env["OPENAI_API_KEY"] = "sk-from-env"
    login = await cli("auth", "login", "anthropic", stdin=b"sk-ant-secret\n")
    assert login.returncode == 0, login.stderr.decode()
    path = cli.data / "auth.json"
    assert login.stderr.decode().splitlines()[-1] == (
        f"kittiwake: stored the credential of anthropic in {path}"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"anthropic": {"type": "api", "key": "sk-ant-secret"}}

    listed = await cli("auth", "list")
    assert listed.returncode == 0, listed.stderr.decode()
    out = listed.stdout.decode()
    assert out.splitlines() == [
        str(path),
        f"  {'anthropic':<24} api key",
        "environment",
        f"  {'openai':<24} OPENAI_API_KEY",
    ]
    assert "secret" not in out and "sk-from-env" not in out

    logout = await cli("auth", "logout", "anthropic")
    assert logout.returncode == 0, logout.stderr.decode()
    assert json.loads(path.read_text()) == {}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = await cli("auth", "logout", "anthropic")
    assert again.returncode == 1
    assert again.stderr.decode() == (f"kittiwake: no stored credential for 'anthropic' in {path}\n")
    empty = await cli("auth", "login", "openai", stdin=b"\n")
    assert empty.returncode == 1 and "no API key given" in empty.stderr.decode()
    assert json.loads(path.read_text()) == {}

    path.write_text('{"openai": {"type": "api"}}')  # valid JSON, not a credential map
    for args in (("auth", "list"), ("auth", "login", "openai"), ("models",)):
        broken = await cli(*args, stdin=b"sk-new\n")
        assert broken.returncode == 1, args
        lines = broken.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"kittiwake: corrupt credential store {path}"
        )
    assert path.read_text() == '{"openai": {"type": "api"}}'  # nothing overwritten


async def test_github_copilot_logs_in_with_the_device_flow(tmp_path, provider):  # noqa: F811
    cli = Cli(tmp_path, None)
    provider.queue(
        Reply(json_body={"device_code": "dev-1", "user_code": "ABCD-1234",
                         "verification_uri": "https://example.test/device", "interval": 0}),
        Reply(json_body={"access_token": "gho_token"}),
    )  # fmt: skip
    done = await cli("auth", "login", "github-copilot", "--enterprise-url", provider.base_url)
    assert done.returncode == 0, done.stderr.decode()
    err = done.stderr.decode()
    assert "open https://example.test/device and enter the code ABCD-1234" in err
    assert [r.path for r in provider.requests] == [
        "/login/device/code",
        "/login/oauth/access_token",
    ]
    stored = json.loads((cli.data / "auth.json").read_text())["github-copilot"]
    assert stored["type"] == "oauth" and stored["access"] == "gho_token"
    listed = await cli("auth", "list")
    assert f"  {'github-copilot':<24} oauth" in listed.stdout.decode().splitlines()


async def test_models_marks_providers_with_credentials(tmp_path, provider):  # noqa: F811
    cli = Cli(tmp_path, provider)  # the local provider, keyed by LOCAL_API_KEY
    document = catalog(provider.base_url)
    document["other"] = {
        "id": "other", "name": "Other", "npm": "@ai-sdk/openai-compatible",
        "api": provider.base_url, "env": ["OTHER_API_KEY"],
        "models": {"o1": {"id": "o1", "name": "Other One", "tool_call": True}},
    }  # fmt: skip
    document["keyless"] = {**document["other"], "id": "keyless", "env": []}  # needs no key
    (cli.data / "models-dev.json").write_text(json.dumps(document))
    done = await cli("models")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        "✓ keyless/o1  Other One",
        "✓ local/m1    Local One  (default)",
        "  other/o1    Other One",
        "✓: the provider has credentials, or needs none (2 of 3)",
    ]
    one = await cli("models", "other")
    assert one.stdout.decode().splitlines()[:-1] == ["  other/o1  Other One"]
    unknown = await cli("models", "nowhere")
    assert unknown.returncode == 1
    assert unknown.stderr.decode() == (
        "kittiwake: unknown provider 'nowhere'; `kittiwake models` lists them\n"
    )
    assert provider.requests == []


async def test_config_shows_every_key_with_its_source_and_the_diagnostics(tmp_path, provider):  # noqa: F811
    cli = Cli(tmp_path, provider)
    home_config = tmp_path / "xdg" / "kittiwake" / "kittiwake.json"
    home_config.parent.mkdir(parents=True)
    home_config.write_text('{"username": "ann", "model": "local/m1"}')
    project = cli.project / "kittiwake.jsonc"
    project.write_text(
        '{\n  // the project\'s own provider\n  "provider": {"proj": {"options": {\n'
        f'    "baseURL": "{provider.base_url}", "apiKey": "sk-secret",\n'
        '    "headers": {"X-Team": "t-secret"}},\n'
        '    "models": {"p1": {"name": "Project One"}}}},\n'
        '  "model": "proj/p1",\n  "frobnicate": true,\n}\n'
    )
    cli.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    cli.env["KITTIWAKE_CONFIG_CONTENT"] = '{"username": "bob"}'
    done = await cli("config")
    assert done.returncode == 0, done.stderr.decode()
    inline = "KITTIWAKE_CONFIG_CONTENT"
    assert done.stdout.decode().splitlines() == [
        "sources (lowest precedence first):",
        f"  {home_config}",
        f"  {project}",
        f"  {inline}",
        "keys:",
        f'  {inline}\tusername="bob"',
        f'  {project}\tmodel="proj/p1"',
        f'  {project}\tprovider.proj.options.baseURL="{provider.base_url}"',
        f"  {project}\tprovider.proj.options.apiKey=<redacted>",
        f'  {project}\tprovider.proj.options.headers["X-Team"]=<redacted>',
        f'  {project}\tprovider.proj.models.p1.name="Project One"',
        "diagnostics:",
        f"  {project}:8:17: frobnicate: not supported by Kittiwake; ignored",
    ]
    assert "secret" not in done.stdout.decode()

    # The configured provider joins the catalog; its key makes it usable; its model is the default.
    models = await cli("models", "proj")
    assert models.returncode == 0, models.stderr.decode()
    assert models.stdout.decode().splitlines()[0] == "✓ proj/p1  Project One  (default)"

    project.write_text('{"model": 3}')
    for args in (("config",), ("models",)):
        bad = await cli(*args)
        assert bad.returncode == 2, args
        assert bad.stderr.decode() == (
            f"kittiwake: {project}:1:11: model: Expected `str`, got `int`\n"
        )
