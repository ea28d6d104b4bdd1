"""Real SIEM receivers for the delivery tests: an HTTP server taking JSON-lines (or Splunk HEC)
batches, and a TCP syslog listener (RFC 6587 octet counting; TLS with a ``trustme`` CA).
Both can be stopped and started again on the same port, as a SIEM that goes down."""

from __future__ import annotations

import json
import re
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.servers import free_port


class HttpReceiver:
    """Accepts POSTs and keeps each body's lines; ``answer(body) -> status`` may refuse."""

    def __init__(self, answer: Callable[[str], int] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/ingest"
        self.bodies: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.answer = answer or (lambda body: 200)
        self._server: ThreadingHTTPServer | None = None

    @property
    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for body in self.bodies for line in body.splitlines() if line]

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                status = receiver.answer(body)
                if status == 200:
                    receiver.bodies.append(body)
                    receiver.headers.append(dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


FRAME = re.compile(rb"(\d+) ")
SYSLOG_HEADER = re.compile(
    r"^<(?P<pri>\d{1,3})>1 (?P<time>\S+) (?P<host>\S+) (?P<app>\S+) - (?P<msgid>\S+) - "
    r"(?P<msg>.*)$",
    re.S,
)


class SyslogReceiver:
    """A TCP (or TLS) syslog listener: reads octet-counted frames until the sender closes."""

    def __init__(self, tls_context: ssl.SSLContext | None = None) -> None:
        self.port = free_port()
        self.tls_context = tls_context
        self.messages: list[dict[str, str]] = []
        self._socket: socket.socket | None = None

    def start(self) -> SyslogReceiver:
        self._socket = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        threading.Thread(target=self._serve, args=(self._socket,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            if self.tls_context is not None:
                conn = self.tls_context.wrap_socket(conn, server_side=True)
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()
        while data:
            match = FRAME.match(data)
            assert match, f"not an octet-counted frame: {data[:60]!r}"
            start = match.end()
            length = int(match.group(1))
            message = data[start : start + length].decode()
            data = data[start + length :]
            header = SYSLOG_HEADER.match(message)
            assert header, f"not an RFC 5424 message: {message[:120]!r}"
            self.messages.append(header.groupdict())

    @property
    def records(self) -> list[dict[str, Any]]:
        return [json.loads(m["msg"]) for m in self.messages]
