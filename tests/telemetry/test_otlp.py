"""OTLP export: the same spans reach a local OTLP/HTTP receiver through OpenTelemetry's
exporter, decoded here with the opentelemetry-proto messages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from runtime import Location, Prompt, llm, open_runtime
from storage import TelemetryOptions
from tests.execution.conftest import answer


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest], list[dict[str, str]]]]:
    """A local OTLP/HTTP traces receiver: each POST body decoded as ExportTraceServiceRequest."""
    received: list[ExportTraceServiceRequest] = []
    headers: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/traces"
            assert self.headers["Content-Type"] == "application/x-protobuf"
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append(request)
            headers.append(dict(self.headers.items()))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1/traces", received, headers
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_spans_reach_a_local_otlp_receiver(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received, headers):
        options = TelemetryOptions(
            flush_interval=0.01,
            otlp_endpoint=endpoint,
            otlp_headers={"x-team": "core"},
            sample=1.0,
        )
        client = llm.ScriptedLLM([answer("hi")])
        async with open_runtime(data_dir=tmp_path / "data", llm=client, telemetry=options) as rt:
            info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
            await rt.sessions.prompt(info.id, prompt=Prompt(text="hello"))
            await rt.sessions.wait_idle(info.id)
            assert rt.telemetry is not None and rt.telemetry.force_flush()
            stored = {s["span_id"] for s in rt.telemetry.spans(session_id=info.id)}
        # Leaving the runtime shut the batch processor down, which exports what it held.
    spans = [
        (resource, span)
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert spans and headers[0]["x-team"] == "core"
    names = {span.name for _, span in spans}
    assert {"admission", "drain", "provider.turn", "storage.batch"} <= names
    service = {
        a.value.string_value for r, _ in spans for a in r.resource.attributes
        if a.key == "service.name"
    }  # fmt: skip
    assert service == {"kittiwake"}
    exported = {span.span_id.hex() for _, span in spans}
    assert stored <= exported  # the same spans as in the tables
    [turn] = [span for _, span in spans if span.name == "provider.turn"]
    attributes = {a.key: a.value for a in turn.attributes}
    assert attributes["session.id"].string_value == info.id
    assert attributes["gen_ai.usage.input_tokens"].int_value == 3
