"""A TCP proxy in front of PostgreSQL that a test can break the way a network or a restart does:
``cut`` drops every connection through it and refuses new ones for a while; ``lose_commit``
drops the connection at the next COMMIT after a given statement: before the COMMIT reaches
the server (the transaction rolls back) or after (it is committed; the client never hears).
Everything else is passed through byte for byte: the clients talk to the real server."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from django.db import connections

from tests.support.outages import _close


class _Pair:
    """One client connection and its connection to the server."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.saw_marker = False
        self.swallow = False  # the server's next answer is dropped, with the connection

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class PostgresProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._commit_marker: bytes | None = None
        self._deliver_commit = True
        self.commits_lost = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="pg-proxy").start()

    # --- faults ----------------------------------------------------------------------------

    def cut(self, seconds: float) -> None:
        """Drop every connection now; refuse new ones for ``seconds``."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            pairs, self._pairs = list(self._pairs), set()
        for pair in pairs:
            pair.close()

    def lose_commit(self, after: bytes, delivered: bool = True) -> None:
        """The next COMMIT sent on a connection that sent ``after`` (e.g. a table's name) since
        its last COMMIT: ``delivered``, it reaches the server and its answer is dropped with
        the connection; else the connection is dropped before it reaches the server."""
        self._deliver_commit = delivered
        self._commit_marker = after

    def close(self) -> None:
        self._closed = True
        self.cut(0)
        self.listener.close()

    # --- plumbing --------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self._down_until:
                client.close()  # the database is "down": nothing answers
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(pair,), daemon=True).start()

    def _upstream(self, pair: _Pair) -> None:
        try:
            while data := pair.client.recv(65536):
                marker = self._commit_marker
                if marker is not None and marker in data:
                    pair.saw_marker = True
                if b"COMMIT\x00" in data:
                    if pair.saw_marker and self._commit_marker is not None:
                        self._commit_marker = None
                        if not self._deliver_commit:
                            self.commits_lost += 1
                            break
                        pair.swallow = True
                    pair.saw_marker = False
                pair.server.sendall(data)
        except OSError:
            pass
        self._drop(pair)

    def _downstream(self, pair: _Pair) -> None:
        try:
            while data := pair.server.recv(65536):
                if pair.swallow:
                    self.commits_lost += 1
                    break
                pair.client.sendall(data)
        except OSError:
            pass
        self._drop(pair)

    def _drop(self, pair: _Pair) -> None:
        with self._lock:
            self._pairs.discard(pair)
        pair.close()


@contextlib.contextmanager
def database_through_proxy(alias: str = "default") -> Iterator[PostgresProxy]:
    """Point ``alias`` (every thread's connection: they share its settings) at a proxy in
    front of its PostgreSQL server until the block ends. With the connection pool on, a pool
    made anew that waits a second, not ten, for a connection while the proxy is cut."""
    connection = connections[alias]
    saved = dict(connection.settings_dict)
    proxy = PostgresProxy(saved.get("HOST") or "127.0.0.1", int(saved.get("PORT") or 5432))
    _close(connection)
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(proxy.port))
    options = dict(connection.settings_dict.get("OPTIONS", {}))
    if isinstance(options.get("pool"), dict):
        options["pool"] = {**options["pool"], "min_size": 0, "timeout": 1}
    connection.settings_dict["OPTIONS"] = options
    try:
        yield proxy
    finally:
        _close(connection)
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
        proxy.close()
