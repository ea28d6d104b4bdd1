"""Handlers for the benchmarks."""

import time
from typing import Any


def noop(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"ok": True}


def sleep_200ms(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    time.sleep(0.2)
    return {"slept_ms": 200}
