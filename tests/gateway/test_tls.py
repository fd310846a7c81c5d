"""HTTPS and wss when a certificate is configured: Hypercorn's TLS, a trustme certificate,
real httpx and websocket clients, and ``kittiwake serve --certfile/--keyfile`` in a real
subprocess."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio
import trustme
from trio_websocket import open_websocket_url

from gateway import Server, serve
from runtime import open_runtime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def certificate_files(ca: trustme.CA, where: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by *ca* and its key, as PEM files in *where*."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = where / "cert.pem", where / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    return certfile, keyfile


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_serves_https_and_wss_with_a_configured_certificate(tmp_path, ca):
    certfile, keyfile = certificate_files(ca, tmp_path)
    async with open_runtime(data_dir=tmp_path / "data") as rt, trio.open_nursery() as nursery:
        server: Server = await nursery.start(
            partial(serve, rt, "127.0.0.1", 0, certfile=certfile, keyfile=keyfile)
        )
        assert server.url.startswith("https://127.0.0.1:")
        context = client_context(ca)
        async with httpx.AsyncClient(base_url=server.url, verify=context) as http:
            health = await http.get("/api/health")
            assert health.status_code == 200 and health.json() == {"healthy": True}
            created = await http.post("/api/session", json={})
            assert created.status_code == 200
        async with httpx.AsyncClient(base_url=server.url) as untrusting:
            with pytest.raises(httpx.ConnectError):  # the certificate is not trusted there
                await untrusting.get("/api/health")
        plain = server.url.replace("https://", "http://")
        async with httpx.AsyncClient(base_url=plain) as cleartext:
            with pytest.raises(httpx.HTTPError):  # the TLS port does not speak cleartext
                await cleartext.get("/api/health")
        wss = server.url.replace("https://", "wss://") + "/api/ws"
        async with open_websocket_url(wss, ssl_context=context) as ws:
            await ws.send_message(json.dumps({"type": "unsubscribe", "ref": 1, "sessionID": "s"}))
            with trio.fail_after(10):
                assert json.loads(await ws.get_message()) == {
                    "type": "reply",
                    "ref": 1,
                    "data": None,
                }
        server.stop()


async def test_kittiwake_serve_with_certfile_and_keyfile_serves_https(tmp_path, ca):
    certfile, keyfile = certificate_files(ca, tmp_path)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path),
        "KITTIWAKE_DATA_DIR": str(tmp_path / "data"),
    }  # fmt: skip
    command = [
        sys.executable, "-m", "gateway", "serve", "--port", "0", "--directory", str(tmp_path),
        "--certfile", str(certfile), "--keyfile", str(keyfile),
    ]  # fmt: skip
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(
            partial(trio.run_process, command, cwd=ROOT, env=env, check=False,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            seen = b""
            with trio.fail_after(30):
                while b"serving" not in seen or not seen.endswith(b"\n"):
                    chunk = await proc.stdout.receive_some(4096)
                    assert chunk, seen
                    seen += chunk
            url = seen.decode().split("serving ")[1].split()[0]
            assert url.startswith("https://127.0.0.1:")
            async with httpx.AsyncClient(base_url=url, verify=client_context(ca)) as http:
                assert (await http.get("/api/health")).json() == {"healthy": True}
        finally:
            proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await proc.wait() == 0


@pytest.mark.parametrize("given", [("--certfile",), ("--keyfile",), ("--certfile", "--keyfile")])
async def test_a_missing_or_unreadable_certificate_is_a_clear_error(tmp_path, given):
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path),
        "KITTIWAKE_DATA_DIR": str(tmp_path / "data"),
    }  # fmt: skip
    flags = [item for flag in given for item in (flag, str(tmp_path / "missing.pem"))]
    command = [sys.executable, "-m", "gateway", "serve", "--port", "0", *flags]
    with trio.fail_after(30):
        done = await trio.run_process(
            command, cwd=ROOT, env=env, check=False, capture_stdout=True, capture_stderr=True
        )
    assert done.returncode == 1
    err = done.stderr.decode()
    if len(given) == 1:
        assert "--certfile and --keyfile go together" in err
    else:
        assert "cannot load the TLS certificate" in err and "missing.pem" in err
    assert "Traceback" not in err
