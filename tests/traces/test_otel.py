"""OpenTelemetry export: GenAI semantic conventions, the run's request id as the trace id,
masked content only; and a real OTLP/HTTP collector (a local server) receiving the spans."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness.celery import app as celery_app
from tests.runs import demo_run
from tests.traces import pii
from tests.traces.conftest import start_pii_run
from traces import otel
from traces.models import Span

QUESTION = "Why has ticket T-20250318-007 not been handled?"


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    otel.configure_tracing(exporter, batch=False)
    yield exporter
    otel.shutdown_tracing()


def test_every_stored_span_is_exported_under_the_runs_request_id(acme, exported):
    run = demo_run(acme)

    spans = exported.get_finished_spans()

    stored = {s.span_id: s for s in Span.objects.filter(request_id=run["request_id"])}
    assert {f"{s.context.span_id:016x}" for s in spans} == set(stored)
    assert {f"{s.context.trace_id:032x}" for s in spans} == {run["request_id"]}
    for span in spans:
        row = stored[f"{span.context.span_id:016x}"]
        parent = f"{span.parent.span_id:016x}" if span.parent else ""
        assert parent == row.parent_span_id


def test_model_calls_carry_the_genai_chat_attributes(acme, exported):
    run = demo_run(acme)

    chats = [s for s in exported.get_finished_spans() if s.name == "chat demo"]

    assert len(chats) == 4
    stored = Span.objects.filter(request_id=run["request_id"], kind="model_call")
    for span, row in zip(chats, stored.order_by("sequence"), strict=True):
        assert span.kind == SpanKind.CLIENT
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == "scripted"
        assert span.attributes["gen_ai.request.model"] == "demo"
        assert span.attributes["gen_ai.response.model"] == "scripted:demo"
        assert span.attributes["gen_ai.usage.input_tokens"] == row.attributes["prompt_tokens"]
        assert span.attributes["gen_ai.usage.output_tokens"] == row.attributes["completion_tokens"]
        assert span.attributes["harness.request_id"] == run["request_id"]
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert json.loads(chats[0].attributes["gen_ai.input.messages"])[1]["content"] == QUESTION


def test_tool_calls_carry_the_genai_execute_tool_attributes(acme, exported):
    demo_run(acme)

    tools = [
        s
        for s in exported.get_finished_spans()
        if s.attributes.get("gen_ai.operation.name") == "execute_tool"
    ]

    assert [s.name for s in tools] == [
        "execute_tool get_ticket",
        "execute_tool update_ticket",
        "execute_tool notify_user",
    ]
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == [
        "call_1_1",
        "call_2_1",
        "call_3_1",
    ]
    assert json.loads(tools[1].attributes["gen_ai.tool.call.arguments"])["action"] == "assign"
    root = next(s for s in exported.get_finished_spans() if s.parent is None)
    assert root.name == "invoke_agent ticket-assistant"
    assert root.attributes["gen_ai.agent.name"] == "ticket-assistant"


def test_a_refused_call_is_an_error_span(acme, exported, agent_dir, tmp_path):
    from tests.factories import write_agent, write_script

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    script = write_script(
        scripts,
        [
            {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}]},
            {"text": "I may not read customers."},
        ],
    )
    agent = write_agent(agent_dir, model=f"scripted:{script}")
    acme.post("/api/v1/runs", {"agent": agent["name"], "user": "bob", "input": "who is C-1001?"})

    refused = [
        s for s in exported.get_finished_spans() if s.name == "policy_check acl get_customer"
    ]

    assert len(refused) == 1
    assert refused[0].status.status_code == StatusCode.ERROR
    assert refused[0].attributes["error.type"] == "refused"
    assert refused[0].attributes["gen_ai.tool.name"] == "get_customer"


def test_exported_spans_carry_masked_content_only(acme, pii_agent, exported):
    start_pii_run(acme, pii_agent)

    spans = exported.get_finished_spans()

    exported_text = json.dumps([dict(s.attributes) for s in spans], ensure_ascii=False)
    assert [v for v in pii.forbidden() if v in exported_text] == []
    assert "139****5678" in exported_text
    assert "Z**** W**" in exported_text


class Collector(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP receiver: keeps each decoded export request."""

    received: list[ExportTraceServiceRequest]

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_with_an_otlp_endpoint_configured_the_run_and_the_request_reach_the_collector(
    acme, collector, settings
):
    settings.HARNESS_OTEL_TRACES_ENDPOINT = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    telemetry = otel.configure_from_settings()
    try:
        run = demo_run(acme)
        assert telemetry.provider.force_flush()
    finally:
        otel.shutdown_tracing()

    spans = [
        span
        for path, request in collector.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert {path for path, _ in collector.received} == {"/v1/traces"}
    run_spans = [s for s in spans if s.trace_id.hex() == run["request_id"]]
    assert {s.name for s in run_spans} >= {"invoke_agent ticket-assistant", "chat demo"}
    server = [s for s in spans if s.kind == s.SPAN_KIND_SERVER]
    assert len(server) == 1  # the Django request, instrumented
    assert server[0].trace_id.hex() != run["request_id"]
    root = next(s for s in run_spans if not s.parent_span_id)
    assert [link.span_id for link in root.links] == [server[0].span_id]


def test_with_an_otlp_endpoint_configured_queuing_an_async_run_is_traced_through_celery(
    acme, collector, settings
):
    settings.HARNESS_OTEL_TRACES_ENDPOINT = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    telemetry = otel.configure_from_settings()
    try:
        response = acme.post(
            "/api/v1/runs",
            {"agent": "ticket-assistant", "user": "bob", "input": QUESTION, "mode": "async"},
        )
        assert response.status_code == 202
        assert telemetry.provider.force_flush()
    finally:
        otel.shutdown_tracing()
        celery_app.control.purge()  # no worker runs here: drop the queued message

    spans = [
        span
        for _, request in collector.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    published = [s for s in spans if s.kind == s.SPAN_KIND_PRODUCER]
    assert [s.name for s in published] == ["apply_async/harness.execute_run"]
    server = next(s for s in spans if s.kind == s.SPAN_KIND_SERVER)
    assert published[0].trace_id == server.trace_id  # published within the request's trace
