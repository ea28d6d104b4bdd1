"""Live run events as Server-Sent Events, resumable with ``Last-Event-ID``, without a thread
per stream.

A stream used to hold a server thread for up to 600 s, polling the database every 0.2 s:
eight of them took every endpoint down. Now:

- ``GET /runs/{id}/events`` is an async view (served by an ASGI server: gunicorn with uvicorn
  workers). Its opening — authentication, the run lookup, ``Last-Event-ID``, the tenant's
  stream slot — is the DRF view ``RunEventsView`` run once on a shared worker thread, so
  errors keep the API's one format; then the response streams from the event loop.
- One ``EventHub`` per event loop polls the database for *all* open streams of the process:
  one query for the new events of every watched run and one for their statuses, every
  ``POLL_INTERVAL_S``, on one dedicated thread (one database connection). 200 open streams
  cost two queries per 0.2 s, not 200 threads and 1 000 queries a second.
- Each tenant may hold ``HARNESS_EVENT_STREAMS_PER_TENANT`` streams open at once, across every
  process (``policy.open_event_stream``); one more is ``429 too_many_event_streams`` with
  ``Retry-After``. A stream's slot is freed when its response closes (client gone, run
  finished, or ``MAX_STREAM_S`` reached: the client reconnects with ``Last-Event-ID``).

The events' ids are the ``RunEvent`` sequence numbers of the run (1, 2, …), as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError, close_old_connections, connection
from django.db.models import Q
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from harness.api.parsers import event_cursor
from harness.models import TERMINAL_STATUSES, Run, RunEvent
from harness.queries import access_run_by_id
from policy import services as policy
from policy.api.permissions import key_scopes
from policy.key_scopes import RUNS_READ

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.2
HEARTBEAT_S = 15.0
# A stream is closed after this long; the client reconnects with Last-Event-ID.
MAX_STREAM_S = float(policy.MAX_EVENT_STREAM_S)
# Events sent per run and poll at most (a long backlog is sent over several polls).
WINDOW = 500
# Last-Event-ID is a sequence number: at most this many decimal digits.
MAX_ID_DIGITS = 18


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return json.dumps(data).encode()


@dataclass(frozen=True)
class StreamGrant:
    run_id: str
    tenant: str
    after: int
    stream_id: str


class RunEventsView(APIView):
    """Opens a stream (its ``get`` runs on a worker thread); ``as_view`` serves the stream
    itself asynchronously."""

    renderer_classes = [EventStreamRenderer, *APIView.renderer_classes]
    permission_classes = [key_scopes(get=RUNS_READ)]

    @extend_schema(
        parameters=[
            OpenApiParameter("Last-Event-ID", int, OpenApiParameter.HEADER, required=False),
            OpenApiParameter("after", int, required=False, description="Same as Last-Event-ID."),
        ],
        responses={
            200: OpenApiResponse(description="text/event-stream of run events"),
            429: OpenApiResponse(description="too_many_event_streams, with Retry-After"),
        },
    )
    def get(self, request: Request, run_id: str) -> Response:
        """Stream the run's events; ends after the run finishes and every event was sent."""
        run = access_run_by_id(request.user.tenant, run_id)
        after = event_cursor(
            request.headers.get("Last-Event-ID"), request.query_params.get("after")
        )
        stream_id = uuid.uuid4().hex
        policy.open_event_stream(run.tenant.slug, stream_id)
        response = Response(status=200)
        response.grant = StreamGrant(str(run.id), run.tenant.slug, after, stream_id)
        return response

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # An error is a JSON document, not an event stream (negotiation picked the stream's
        # renderer for a client that accepts it, which announced JSON as text/event-stream).
        if getattr(response, "grant", None) is None and isinstance(response, Response):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        opening = super().as_view(**initkwargs)

        async def events_view(request: HttpRequest, run_id: str) -> HttpResponseBase:
            return await serve_events(opening, request, run_id)

        # drf-spectacular documents the endpoint from these, as for any DRF view.
        events_view.cls = cls  # type: ignore[attr-defined]
        events_view.initkwargs = initkwargs  # type: ignore[attr-defined]
        events_view.csrf_exempt = True  # type: ignore[attr-defined]
        return events_view


class EventStreamResponse(StreamingHttpResponse):
    """The stream; closing it (however it ended, the client gone included) frees its slot."""

    def __init__(self, grant: StreamGrant, content: Any) -> None:
        super().__init__(content, content_type="text/event-stream")
        self.grant = grant
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"

    def close(self) -> None:
        try:
            policy.close_event_stream(self.grant.tenant, self.grant.stream_id)
            _release_connection()
        finally:
            super().close()


async def serve_events(opening: Any, request: HttpRequest, run_id: str) -> HttpResponseBase:
    """Open on a worker thread (auth, run, slot); then stream from the event loop (under
    ASGI), or from this request's thread (under WSGI, e.g. ``runserver``: a thread per stream,
    which is why production serves ASGI)."""
    response = await sync_to_async(_open, thread_sensitive=False)(opening, request, run_id)
    grant = getattr(response, "grant", None)
    if grant is None:
        return response  # an error, in the API's format
    if isinstance(request, ASGIRequest):
        return EventStreamResponse(grant, _stream(grant))
    return EventStreamResponse(grant, _polling_stream(grant))


def _open(opening: Any, request: HttpRequest, run_id: str) -> HttpResponseBase:
    try:
        response = opening(request, run_id=run_id)
        if getattr(response, "grant", None) is None and hasattr(response, "render"):
            response.render()
        return response
    finally:
        # This thread is shared by every stream opening: hand its connection back now, not
        # when the stream ends.
        _release_connection()


def _release_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


async def _stream(grant: StreamGrant):
    hub = EventHub.for_running_loop()
    subscriber = hub.subscribe(grant.run_id, grant.after)
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + MAX_STREAM_S
    try:
        yield "retry: 1000\n\n"
        while True:
            remaining = ends_at - loop.time()
            if remaining <= 0:
                return
            try:
                batch = await asyncio.wait_for(
                    subscriber.queue.get(), timeout=min(HEARTBEAT_S, remaining)
                )
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if batch is None:  # the run ended and every event was sent
                return
            yield "".join(batch)
    finally:
        hub.unsubscribe(subscriber)


def _polling_stream(grant: StreamGrant) -> Iterator[str]:
    """The same stream for a WSGI server: this thread polls for this stream alone."""
    started = last_sent = time.monotonic()
    cursor, ended_polls = grant.after, 0
    yield "retry: 1000\n\n"
    while time.monotonic() - started < MAX_STREAM_S:
        ended, events = _fetch({grant.run_id: cursor})
        rows = events.get(grant.run_id, [])
        if rows:
            cursor, ended_polls, last_sent = rows[-1][0], 0, time.monotonic()
            yield "".join(text for _, text in rows)
        elif grant.run_id in ended:
            ended_polls += 1
            if ended_polls >= 2:
                return
        elif time.monotonic() - last_sent > HEARTBEAT_S:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        close_old_connections()
        time.sleep(POLL_INTERVAL_S)


# --- one poller per event loop for every stream of the process --------------------------------


@dataclass(eq=False)
class Subscriber:
    run_id: str
    cursor: int
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    ended_polls: int = 0  # consecutive polls that saw the run ended and nothing new


class EventHub:
    """Watches the runs of every open stream of one event loop and hands each stream its new
    events. Polls only while some stream is open."""

    _hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventHub] = (
        weakref.WeakKeyDictionary()
    )
    _hubs_lock = threading.Lock()
    # One thread (so one database connection) per process does every poll.
    _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-events")

    def __init__(self) -> None:
        self.subscribers: dict[str, set[Subscriber]] = {}
        self.task: asyncio.Task | None = None

    @classmethod
    def for_running_loop(cls) -> EventHub:
        loop = asyncio.get_running_loop()
        with cls._hubs_lock:
            hub = cls._hubs.get(loop)
            if hub is None:
                hub = cls._hubs[loop] = EventHub()
            return hub

    def subscribe(self, run_id: str, after: int) -> Subscriber:
        subscriber = Subscriber(run_id, after)
        self.subscribers.setdefault(run_id, set()).add(subscriber)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._poll())
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        watching = self.subscribers.get(subscriber.run_id)
        if watching is not None:
            watching.discard(subscriber)
            if not watching:
                del self.subscribers[subscriber.run_id]

    @property
    def watched(self) -> int:
        return sum(len(s) for s in self.subscribers.values())

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        while self.subscribers:
            cursors = {
                run_id: min(s.cursor for s in subs) for run_id, subs in self.subscribers.items()
            }
            try:
                ended, events = await loop.run_in_executor(self._executor, _fetch, cursors)
            except Exception:  # the poller outlives any one failure; the next poll retries
                logger.exception("polling run events failed")
                ended, events = set(), {}
            self._deliver(ended, events)
            await asyncio.sleep(POLL_INTERVAL_S)

    def _deliver(self, ended: set[str], events: dict[str, list[tuple[int, str]]]) -> None:
        for run_id, subscribers in list(self.subscribers.items()):
            rows = events.get(run_id, [])
            for subscriber in subscribers:
                new = [text for sequence, text in rows if sequence > subscriber.cursor]
                if new:
                    subscriber.cursor = max(s for s, _ in rows)
                    subscriber.ended_polls = 0
                    subscriber.queue.put_nowait(new)
                elif run_id in ended:
                    # Ended with nothing new twice in a row: an event written just after the
                    # status (the run's last) has had a poll to arrive.
                    subscriber.ended_polls += 1
                    if subscriber.ended_polls >= 2:
                        subscriber.queue.put_nowait(None)


def _fetch(cursors: dict[str, int]) -> tuple[set[str], dict[str, list[tuple[int, str]]]]:
    """The watched runs that ended (read first), and each run's events after its cursor,
    formatted as SSE. Runs on the hub's thread."""
    try:
        ids = list(cursors)
        statuses = dict(Run.objects.filter(id__in=ids).values_list("id", "status"))
        ended = {
            run_id
            for run_id in ids
            if statuses.get(uuid.UUID(run_id)) in TERMINAL_STATUSES | {None}
        }
        window = Q()
        for run_id, after in cursors.items():
            window |= Q(run_id=run_id, sequence__gt=after, sequence__lte=after + WINDOW)
        rows = RunEvent.objects.filter(window).order_by("run_id", "sequence")
        events: dict[str, list[tuple[int, str]]] = {}
        for run_id, sequence, event_type, data in rows.values_list(
            "run_id", "sequence", "type", "data"
        ):
            payload = json.dumps(data, ensure_ascii=False, default=str)
            events.setdefault(str(run_id), []).append(
                (sequence, f"id: {sequence}\nevent: {event_type}\ndata: {payload}\n\n")
            )
        return ended, events
    except DatabaseError:
        connection.close()
        raise
