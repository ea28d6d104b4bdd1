"""The console's static files (ServeStatic), served from a sync middleware chain.

ServeStatic's Django middleware is async only. In the sync chain both servers build (WSGI, and
the ASGI handler of harness/asgi_handler.py) Django adapts it with ``async_to_sync``, and every
request paid for it: under ASGI a round trip to the event loop, under WSGI a new event loop in
a new thread. Here only a request under the static prefix goes to ServeStatic; the API's
requests pass straight through.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import async_to_sync, sync_to_async
from django.http import HttpRequest, HttpResponseBase
from servestatic.middleware import ServeStaticMiddleware


class StaticFilesMiddleware:
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        # ServeStatic reads its settings and indexes the files here, once; a path under its
        # prefix that is no file goes on down the chain (a 404 of the URL resolver).
        self.static = ServeStaticMiddleware(sync_to_async(get_response))
        self.serve = async_to_sync(self.static)

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(self.static.static_prefix):
            return self.serve(request)
        return self.get_response(request)
