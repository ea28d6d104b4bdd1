"""Finding 2: eight open ``GET /runs/{id}/events`` streams made ``/healthz`` and every endpoint
time out (each held a server thread up to 600 s, polling every 0.2 s). Streams are now served
by an async view under the production server (gunicorn with uvicorn workers), one poller per
process for all of them, and capped per tenant with a 429. This test starts that real server
on the test database and holds 200 streams open against it."""

from __future__ import annotations

import asyncio
import time
from contextlib import closing

import httpx
import pytest

from harness.api_keys import create_api_key
from tests.support.servers import serve

STREAMS = 200
ANSWER_WITHIN_S = 3.0


@pytest.fixture
def asgi_server(demo, django_db_blocker, tmp_path_factory):
    """``gunicorn harness.asgi -k uvicorn_worker.UvicornWorker``, one worker, on the test
    database, each tenant allowed ``STREAMS`` streams."""
    env = {"HARNESS_EVENT_STREAMS_PER_TENANT": str(STREAMS)}
    with closing(serve(django_db_blocker, tmp_path_factory, env=env)) as servers:
        yield next(servers)("asgi").url


async def open_stream(client: httpx.AsyncClient, path: str, opened: list) -> None:
    async with client.stream("GET", path) as response:
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_text():
            if "retry:" in chunk:
                opened.append(response)
                await asyncio.sleep(3600)  # hold it open until cancelled


async def answer_times(client: httpx.AsyncClient, run_path: str) -> dict[str, float]:
    times = {}
    for path in ("/healthz", run_path, "/api/v1/runs?limit=5"):
        started = time.monotonic()
        response = await client.get(path, timeout=ANSWER_WITHIN_S)
        assert response.status_code == 200, (path, response.text)
        times[path] = time.monotonic() - started
    return times


def test_two_hundred_open_streams_leave_the_api_answering(asgi_server):
    acme_key = create_api_key("acme", "streams").secret
    globex_key = create_api_key("globex", "streams").secret

    async def scenario() -> None:
        limits = httpx.Limits(max_connections=STREAMS + 20, max_keepalive_connections=0)
        headers = {"Authorization": f"Bearer {acme_key}"}
        async with (
            httpx.AsyncClient(
                base_url=asgi_server, headers=headers, timeout=30, limits=limits
            ) as streams,
            httpx.AsyncClient(base_url=asgi_server, headers=headers, timeout=30) as api,
        ):
            run = (
                await api.post(
                    "/api/v1/runs",
                    json={
                        "agent": "ticket-assistant",
                        "user": "bob",
                        "input": "hi",
                        "mode": "async",
                    },
                )
            ).json()  # no worker: it stays queued, so its streams stay open
            events = f"/api/v1/runs/{run['id']}/events"
            opened: list = []
            holders = [
                asyncio.create_task(open_stream(streams, events, opened)) for _ in range(STREAMS)
            ]
            deadline = time.monotonic() + 60
            while len(opened) < STREAMS and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                for task in holders:
                    if task.done() and task.exception():
                        raise task.exception()
            assert len(opened) == STREAMS

            times = await answer_times(api, f"/api/v1/runs/{run['id']}")
            print(f"with {STREAMS} streams open, answered in (s): {times}")
            assert max(times.values()) < ANSWER_WITHIN_S, times

            one_more = await api.get(events)
            assert one_more.status_code == 429
            assert one_more.json()["error"]["code"] == "too_many_event_streams"
            assert int(one_more.headers["Retry-After"]) >= 1
            other_tenant = await api.get(
                "/api/v1/runs?limit=1", headers={"Authorization": f"Bearer {globex_key}"}
            )
            assert other_tenant.status_code == 200

            for task in holders:
                task.cancel()
            await asyncio.gather(*holders, return_exceptions=True)
            # The server notices the clients left and frees their slots.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                async with api.stream("GET", events) as again:
                    if again.status_code == 200:
                        break
                await asyncio.sleep(0.5)
            else:
                pytest.fail("the slots of closed streams were not freed")
            for bad in (
                await api.get(f"{events}?after=%C2%B2"),
                await api.get(events, headers={"Last-Event-ID": "9" * 5000}),
            ):
                assert bad.status_code == 400
                assert bad.json()["error"]["code"] == "invalid_request"

    asyncio.run(scenario())
