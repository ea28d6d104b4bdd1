"""The gateway's own overhead per model call, against a local server that answers at once.

For each adapter, streaming and not, every round makes one raw HTTP request (http.client,
kept alive, the same body the gateway would send) and one ``gateway.services.complete`` call
to the same server; the overhead of a round is the difference. Prints median and p95 in µs.

    .venv/bin/python bench/gateway.py [rounds]
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.test")

import django

django.setup()

from django.conf import settings  # noqa: E402

from gateway.messages import Message, ToolSpec  # noqa: E402
from gateway.services import complete  # noqa: E402
from tests.fake_providers import (  # noqa: E402
    FakeProvider,
    anthropic_calls_stream,
    anthropic_message,
    openai_calls_stream,
    openai_completion,
)

CALLS = [
    ("call_1", "get_ticket", json.dumps({"ticket_id": "T-20250318-007"})),
    ("call_2", "notify_user", json.dumps({"user_id": "agent-li", "message": "Please pick it up."})),
]
MESSAGES = [
    Message(role="system", content="You are a support operations assistant. " * 10),
    Message(role="user", content="Why has ticket T-20250318-007 not been handled?"),
]
TOOLS = [
    ToolSpec(
        name="get_ticket",
        description="Look a ticket up by its id.",
        parameters={"type": "object", "properties": {"ticket_id": {"type": "string"}}},
    )
]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(server: FakeProvider, route: str, path: str, rounds: int) -> dict[str, float]:
    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port)
    body = json.dumps({"model": "m", "messages": [m.to_dict() for m in MESSAGES]})
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
    raw_times, gateway_times, overheads = [], [], []
    for number in range(rounds + 20):
        started = time.perf_counter()
        connection.request("POST", path, body, headers)
        connection.getresponse().read()
        raw = time.perf_counter() - started
        started = time.perf_counter()
        complete(route, MESSAGES, TOOLS)
        through_gateway = time.perf_counter() - started
        if number >= 20:  # warm-up rounds fill the connection pools and caches
            raw_times.append(raw * 1e6)
            gateway_times.append(through_gateway * 1e6)
            overheads.append((through_gateway - raw) * 1e6)
    connection.close()
    return {
        "raw_median": statistics.median(raw_times),
        "gateway_median": statistics.median(gateway_times),
        "overhead_median": statistics.median(overheads),
        "overhead_p95": percentile(overheads, 0.95),
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    openai_server, anthropic_server = FakeProvider("openai"), FakeProvider("anthropic")
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = openai_server.url, "sk-bench"
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = anthropic_server.url, "sk-bench"
    settings.HARNESS_ROUTES = {
        "openai:stream": {"stream": True},
        "anthropic:stream": {"stream": True},
    }
    cases = [
        ("openai, plain", openai_server, "openai:plain", openai_completion(calls=CALLS)),
        ("openai, stream", openai_server, "openai:stream", openai_calls_stream(CALLS)),
        ("anthropic, plain", anthropic_server, "anthropic:plain",
         anthropic_message(calls=[(i, n, json.loads(a)) for i, n, a in CALLS])),
        ("anthropic, stream", anthropic_server, "anthropic:stream", anthropic_calls_stream(CALLS)),
    ]  # fmt: skip
    print(f"gateway overhead per call, {rounds} rounds each, two tool calls per response (µs)")
    print(f"{'case':<20}{'raw HTTP':>10}{'gateway':>10}{'overhead':>10}{'p95':>10}")
    for label, server, route, reply in cases:
        server.always = reply
        path = "/v1/chat/completions" if server.api == "openai" else "/v1/messages"
        figures = measure(server, route, path, rounds)
        print(
            f"{label:<20}{figures['raw_median']:>10.0f}{figures['gateway_median']:>10.0f}"
            f"{figures['overhead_median']:>10.0f}{figures['overhead_p95']:>10.0f}"
        )
    openai_server.close()
    anthropic_server.close()


if __name__ == "__main__":
    main()
