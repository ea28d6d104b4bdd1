"""The ASGI handler's request threads: kept between requests, the last idle one taken first,
never more than their number (harness/request_threads.py)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.request_threads import RequestThreads


def test_requests_one_after_another_are_served_by_one_thread():
    threads = RequestThreads(8)
    served = [threads.submit(threading.get_ident).result(timeout=5) for _ in range(50)]
    assert len(set(served)) == 1
    assert threads.threads == 1


def test_the_thread_that_went_idle_last_takes_the_next_request():
    threads = RequestThreads(8)
    gates = [threading.Event() for _ in range(3)]
    running = [
        threads.submit(lambda gate=gate: (gate.wait(5), threading.get_ident())[1]) for gate in gates
    ]
    idents = []
    for gate, future in zip(gates, running, strict=True):
        gate.set()
        idents.append(future.result(timeout=5))
    assert len(set(idents)) == 3
    assert threads.submit(threading.get_ident).result(timeout=5) == idents[-1]


def test_a_request_past_the_limit_waits_for_a_thread_and_requests_run_in_order():
    threads = RequestThreads(1)
    gate = threading.Event()
    order: list[int] = []
    first = threads.submit(lambda: (gate.wait(5), order.append(0)))
    later = [threads.submit(order.append, n) for n in range(1, 5)]
    time.sleep(0.05)
    assert order == []  # all wait behind the first
    gate.set()
    for future in [first, *later]:
        future.result(timeout=5)
    assert order == [0, 1, 2, 3, 4]
    assert threads.threads == 1


def test_an_error_reaches_the_caller_and_the_thread_serves_on():
    threads = RequestThreads(2)

    def fails():
        raise LookupError("no such run")

    with pytest.raises(LookupError, match="no such run"):
        threads.submit(fails).result(timeout=5)
    assert threads.submit(lambda: 42).result(timeout=5) == 42
    assert threads.threads == 1


def test_a_request_cancelled_while_it_waited_never_runs():
    threads = RequestThreads(1)
    gate = threading.Event()
    ran: list[str] = []
    first = threads.submit(gate.wait, 5)
    cancelled = threads.submit(ran.append, "cancelled")
    assert cancelled.cancel()
    after = threads.submit(ran.append, "after")
    gate.set()
    first.result(timeout=5)
    after.result(timeout=5)
    assert ran == ["after"]


def test_a_size_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        RequestThreads(0)


@settings(max_examples=25, deadline=None)
@given(size=st.integers(1, 6), jobs=st.integers(1, 40), holds=st.lists(st.booleans(), min_size=1))
def test_every_request_runs_once_on_at_most_size_threads_at_a_time(size, jobs, holds):
    threads = RequestThreads(size)
    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def job(n: int) -> int:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        if holds[n % len(holds)]:
            time.sleep(0.001)
        with lock:
            state["now"] -= 1
        return n * n

    futures = [threads.submit(job, n) for n in range(jobs)]
    assert [f.result(timeout=10) for f in futures] == [n * n for n in range(jobs)]
    assert state["most"] <= size
    assert threads.threads <= size
