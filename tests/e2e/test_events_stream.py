"""Live events over Server-Sent Events, read by a real HTTP client and resumed."""

import json

import httpx

from harness.api_keys import create_api_key
from tests.factories import write_agent, write_script


def read_events(response, stop_after=None):
    events, current = [], {}
    for line in response.iter_lines():
        if line.startswith("id: "):
            current["id"] = int(line[4:])
        elif line.startswith("event: "):
            current["event"] = line[7:]
        elif line.startswith("data: "):
            current["data"] = json.loads(line[6:])
        elif line == "" and current:
            events.append(current)
            current = {}
            if stop_after and len(events) == stop_after:
                break
    return events


def test_the_event_stream_shows_a_run_unfold_and_resumes_from_last_event_id(
    demo, live_server, agent_dir
):
    key = create_api_key("acme", "sse").secret
    headers = {"Authorization": f"Bearer {key}"}
    script = write_script(
        agent_dir.parent,
        [
            {"tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": "T-20250318-007"}}]},
            {"tool_calls": [{"name": "slow_note", "arguments": {"seconds": 0.5}}]},
            {"text": "All done."},
        ],
    )
    name = write_agent(agent_dir, model=f"scripted:{script}", tools=["get_ticket", "slow_note"])[
        "name"
    ]
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        run = client.post(
            "/api/v1/runs", json={"agent": name, "user": "bob", "input": "go", "mode": "sync"}
        ).json()
        url = f"/api/v1/runs/{run['id']}/events"

        with client.stream("GET", url) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first_three = read_events(response, stop_after=3)
        with client.stream(
            "GET", url, headers={"Last-Event-ID": str(first_three[-1]["id"])}
        ) as response:
            rest = read_events(response)

    ids = [e["id"] for e in first_three + rest]
    assert ids == list(range(1, len(ids) + 1))  # nothing lost, nothing repeated
    types = [e["event"] for e in first_three + rest]
    assert types[:3] == ["run.queued", "run.started", "step.started"]
    assert types.count("tool_call.proposed") == 2
    assert types.count("tool_call.finished") == 2
    assert types[-1] == "run.finished"
    deltas = [e["data"]["text"] for e in first_three + rest if e["event"] == "text.delta"]
    assert "".join(deltas) == "All done."
    assert rest[-1]["data"]["status"] == "succeeded"
    finished = [e["data"] for e in first_three + rest if e["event"] == "tool_call.finished"]
    assert [(f["tool"], f["ok"]) for f in finished] == [("get_ticket", True), ("slow_note", True)]


def test_another_tenants_event_stream_is_not_found(demo, live_server):
    acme_key = create_api_key("acme", "a").secret
    globex_key = create_api_key("globex", "g").secret
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        run = client.post(
            "/api/v1/runs",
            headers={"Authorization": f"Bearer {acme_key}"},
            json={"agent": "ticket-assistant", "user": "bob", "input": "hi"},
        ).json()
        response = client.get(
            f"/api/v1/runs/{run['id']}/events", headers={"Authorization": f"Bearer {globex_key}"}
        )

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"
