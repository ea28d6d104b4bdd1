"""Live run events as Server-Sent Events, resumable with ``Last-Event-ID``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from django.db import close_old_connections
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from harness.api.parsers import event_cursor
from harness.events import list_events_after
from harness.models import TERMINAL_STATUSES, Run
from harness.queries import access_run_by_id

POLL_INTERVAL_S = 0.2
HEARTBEAT_S = 15.0
# A stream is closed after this long; the client reconnects with Last-Event-ID.
MAX_STREAM_S = 600.0


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return json.dumps(data).encode()


class RunEventsView(APIView):
    renderer_classes = [EventStreamRenderer, *APIView.renderer_classes]

    @extend_schema(
        parameters=[
            OpenApiParameter("Last-Event-ID", int, OpenApiParameter.HEADER, required=False),
            OpenApiParameter("after", int, required=False, description="Same as Last-Event-ID."),
        ],
        responses={200: OpenApiResponse(description="text/event-stream of run events")},
    )
    def get(self, request: Request, run_id: str) -> StreamingHttpResponse:
        """Stream the run's events; ends after the run finishes and every event was sent."""
        run = access_run_by_id(request.user.tenant, run_id)
        after = event_cursor(
            request.headers.get("Last-Event-ID"), request.query_params.get("after")
        )
        response = StreamingHttpResponse(_stream(run.id, after), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


def _stream(run_id, after: int) -> Iterator[str]:
    started = last_sent = time.monotonic()
    yield "retry: 1000\n\n"
    while time.monotonic() - started < MAX_STREAM_S:
        events = list_events_after(run_id, after)
        for event in events:
            after = event.sequence
            payload = json.dumps(event.data, ensure_ascii=False, default=str)
            yield f"id: {event.sequence}\nevent: {event.type}\ndata: {payload}\n\n"
            last_sent = time.monotonic()
        if not events:
            status = Run.objects.filter(id=run_id).values_list("status", flat=True).first()
            if status is None or status in TERMINAL_STATUSES:
                return
            if time.monotonic() - last_sent > HEARTBEAT_S:
                yield ": keep-alive\n\n"
                last_sent = time.monotonic()
            close_old_connections()
            time.sleep(POLL_INTERVAL_S)
