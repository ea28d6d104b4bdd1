"""Finding H3 of issue 21, end to end: a tenant's pattern must not stall other tenants.

Live, ``(?:a|a)+b`` saved by acme took ``/healthz`` from 0.018 s to 8.7 s and another tenant's
sync run from 0.10 s to 8.9 s. Here the production server (gunicorn with a uvicorn worker, one
process, on the test database) serves acme runs whose tool returns 300 KB of ``a`` while acme
holds two patterns forced into the database past the check: ``(?:a|a)+b`` (the finding's) and
``a(?:a*b)?`` (linear for one RE2 search, quadratic for finding every value, so it spends its
scan budget). Meanwhile ``/healthz`` and a globex run are timed."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.api_keys import create_api_key
from tests.factories import write_agent, write_script, write_tool
from tests.support.servers import serve
from traces.masking.plugins import SCAN_BUDGET_ACTOR
from traces.models import MaskingPattern, MaskingPatternChange

RESULT_CHARS = 300_000
# Generous: the finding measured 8.7 s and 8.9 s; a loaded two-core machine is allowed a lot.
HEALTHZ_WITHIN_S = 2.0
OTHER_RUN_WITHIN_S = 5.0


def large_text(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """A tool result of the size that stalled Python's re: 300 KB of ``a``."""
    return {"text": "a" * RESULT_CHARS}


@pytest.fixture
def server(demo, tmp_path: Path, django_db_blocker, tmp_path_factory):
    tools, agents = tmp_path / "tools", tmp_path / "agents"
    tools.mkdir()
    agents.mkdir()
    tool = write_tool(
        tools,
        handler="tests.security.test_tenant_pattern_stall.large_text",
        description="Returns a large text.",
    )["name"]
    script = write_script(
        tmp_path, [{"tool_calls": [{"name": tool, "arguments": {}}]}, {"text": "Done."}]
    )
    agent = write_agent(agents, model=f"scripted:{script}", tools=[tool], max_steps=4)["name"]
    env = {"HARNESS_TOOL_DIRS": str(tools), "HARNESS_AGENT_DIRS": str(agents)}
    with closing(serve(django_db_blocker, tmp_path_factory, env=env)) as servers:
        yield next(servers)("asgi").url, agent


def timed(call: Any) -> tuple[float, Any]:
    started = time.monotonic()
    response = call()
    return time.monotonic() - started, response


def test_a_tenants_pathological_pattern_stalls_neither_healthz_nor_another_tenants_run(server):
    url, agent = server
    MaskingPattern.objects.create(tenant="acme", kind="loop_ref", pattern=r"(?:a|a)+b", sample="")
    MaskingPattern.objects.create(tenant="acme", kind="order_ref", pattern=r"a(?:a*b)?", sample="")
    acme = {"Authorization": f"Bearer {create_api_key('acme', 'stall').secret}"}
    globex = {"Authorization": f"Bearer {create_api_key('globex', 'stall').secret}"}
    other_run = {"agent": "ticket-assistant", "user": "bob", "input": "hi"}

    with httpx.Client(base_url=url, timeout=120) as client:
        client.post("/api/v1/runs", json=other_run, headers=globex)  # warm the process up
        healthz_before, _ = timed(lambda: client.get("/healthz"))
        other_before, first = timed(
            lambda: client.post("/api/v1/runs", json=other_run, headers=globex)
        )
        assert first.status_code == 200, first.text

        acme_runs: list[tuple[float, httpx.Response]] = []

        def acme_run() -> None:
            with httpx.Client(base_url=url, timeout=120) as own:
                acme_runs.append(
                    timed(
                        lambda: own.post(
                            "/api/v1/runs",
                            json={"agent": agent, "user": "bob", "input": "Go."},
                            headers=acme,
                        )
                    )
                )

        threads = [threading.Thread(target=acme_run) for _ in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # the runs are masking their tool result
        healthz_during = [timed(lambda: client.get("/healthz"))[0] for _ in range(3)]
        other_during, other = timed(
            lambda: client.post("/api/v1/runs", json=other_run, headers=globex)
        )
        for thread in threads:
            thread.join(timeout=120)

    print(
        f"/healthz {healthz_before:.3f} s before, {max(healthz_during):.3f} s at most during; "
        f"globex run {other_before:.3f} s before, {other_during:.3f} s during; "
        f"acme runs {[round(s, 3) for s, _ in acme_runs]} s"
    )
    assert other.status_code == 200, other.text
    assert max(healthz_during) < HEALTHZ_WITHIN_S
    assert other_during < OTHER_RUN_WITHIN_S
    assert [r.status_code for _, r in acme_runs] == [200, 200], [r.text for _, r in acme_runs]
    assert all(s < OTHER_RUN_WITHIN_S for s, _ in acme_runs)

    disabled = MaskingPattern.objects.get(tenant="acme", kind="order_ref")
    assert disabled.enabled is False  # disabled and reported
    change = MaskingPatternChange.objects.get(tenant="acme", kind="order_ref")
    assert (change.action, change.actor) == ("disable", SCAN_BUDGET_ACTOR)
    assert MaskingPattern.objects.get(tenant="acme", kind="loop_ref").enabled is True  # linear
    traces = [
        httpx.get(f"{url}{run.json()['links']['trace']}", headers=acme, timeout=30).text
        for _, run in acme_runs
    ]
    # The run whose scan spent the budget stored the unread rest masked, not in clear (a run
    # that started once the pattern was disabled no longer applies it: that is disabling).
    assert any("a" * 1000 not in trace for trace in traces)
