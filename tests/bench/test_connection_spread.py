"""The benchmark's reading of how a server's client connections are spread over its workers."""

import os
import socket
import subprocess
import sys
import time

import pytest

from bench.support.procs import connections_per_worker

# Two "workers" (children of this test process), each accepting the connections made to its
# own listening socket and holding them open.
_WORKER = """
import socket, sys, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1], flush=True)
held = []
while True:
    held.append(server.accept()[0])
"""


@pytest.fixture
def workers():
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        yield procs, [int(proc.stdout.readline()) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _connect(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]


def _read_spread(port: int, expected: list[int]) -> list[int]:
    deadline = time.monotonic() + 10
    while (spread := connections_per_worker(os.getpid(), port)) != expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return spread


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_connections_to_a_port_are_counted_per_child_busiest_first(workers):
    _, (first, second) = workers
    clients = _connect(first, 2) + _connect(second, 5)
    try:
        # Both children listen on ports of their own: each port's count is that child's.
        assert _read_spread(second, [5, 0]) == [5, 0]
        assert _read_spread(first, [2, 0]) == [2, 0]
    finally:
        for client in clients:
            client.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_closed_connections_are_not_counted(workers):
    _, (first, _) = workers
    clients = _connect(first, 3)
    assert _read_spread(first, [3, 0]) == [3, 0]
    clients[0].close()
    clients[1].close()
    # The client side closed; the worker still holds its end (CLOSE_WAIT), not ESTABLISHED.
    assert _read_spread(first, [1, 0]) == [1, 0]
    clients[2].close()
