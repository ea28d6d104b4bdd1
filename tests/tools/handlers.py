"""Tool handlers for the tests. State lives in module globals, reset before every test."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from tools.errors import ToolErrorCode, TransientToolError

calls: Counter[str] = Counter()
finished: list[str] = []
seen_keys: list[str] = []
release = threading.Event()
_done: dict[str, threading.Event] = {}
_lock = threading.Lock()
_crowd = threading.Condition()
_in_flight = 0
max_in_flight = 0
pair = threading.Barrier(2)


def reset() -> None:
    global _in_flight, max_in_flight, pair
    calls.clear()
    recorded_when_run.clear()
    finished.clear()
    seen_keys.clear()
    release.set()  # let threads abandoned by an earlier test end
    release.clear()
    _done.clear()
    _in_flight = max_in_flight = 0
    pair = threading.Barrier(2)


def echo(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    calls["echo"] += 1
    seen_keys.append(context.idempotency_key)
    return {"echo": arguments, "idempotency_key": context.idempotency_key}


def hang(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Never answers within any test timeout; released when the test ends."""
    calls["hang"] += 1
    release.wait(60)
    return {"released": True}


def boom(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    raise RuntimeError("the ledger is locked\ninternal detail: ledger.py line 42")


def not_json(arguments: dict[str, Any], context: Any) -> Any:
    return {"when": object()}


def finish_after(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Finishes only after the call labelled ``after`` finished: forces a completion order."""
    label = arguments["label"]
    if (after := arguments.get("after")) and not _event(after).wait(5):
        raise RuntimeError(f"{label} waited for {after}, which never finished")
    with _lock:
        finished.append(label)
    _event(label).set()
    return {"label": label}


def meet_a_partner(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Reports whether another call was running at the same time (waits up to 0.5 s)."""
    try:
        pair.wait(0.5)
    except threading.BrokenBarrierError:
        return {"met": False}
    return {"met": True}


def count_in_flight(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Stays in flight until three calls are (or 0.3 s passed), counting the most at once."""
    global _in_flight, max_in_flight
    with _crowd:
        _in_flight += 1
        max_in_flight = max(max_in_flight, _in_flight)
        _crowd.notify_all()
        _crowd.wait_for(lambda: _in_flight >= 3, timeout=0.3)
        _in_flight -= 1
    return {"ok": True}


def flaky(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Fails transiently on the first attempt, succeeds on the next."""
    calls["flaky"] += 1
    if context.attempt == 1:
        raise TransientToolError(ToolErrorCode.HTTP_ERROR, "the service is briefly unavailable")
    return {"attempt": context.attempt}


def many_items(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    items = [
        {"order_id": f"O-{n:04d}", "state": "open", "notes": "x" * 200}
        for n in range(arguments.get("count", 500))
    ]
    return {"count": len(items), "orders": items}


def _event(label: str) -> threading.Event:
    with _lock:
        return _done.setdefault(label, threading.Event())


def big_record(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"order_id": "O-0001", "state": "open", "log": "x" * 5000}


recorded_when_run: list[bool] = []


def note_if_recorded(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Notes whether the call's execution row existed when the handler ran."""
    from tools.models import ToolExecution

    key = context.idempotency_key
    recorded_when_run.append(ToolExecution.objects.filter(idempotency_key=key).exists())
    return {"ok": True}
