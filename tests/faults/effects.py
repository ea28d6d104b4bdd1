"""The fault tier's tool: not idempotent, and every execution leaves a trace outside Harness's
database (a line appended to the file ``HARNESS_FAULT_EFFECTS`` names), so that a call
executed twice — by a driver that took a run over, or by a retried commit — shows."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any


def count_effect(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Act (one line: the call's idempotency key, this process, a fresh id), then wait
    ``seconds`` so that runs are in flight when a fault strikes."""
    effect = uuid.uuid4().hex
    line = f"{context.idempotency_key} {os.getpid()} {effect}\n".encode()
    fd = os.open(os.environ["HARNESS_FAULT_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)  # one write of a short line with O_APPEND: never interleaved
    finally:
        os.close(fd)
    time.sleep(float(arguments.get("seconds", 0)))
    return {"effect": effect}
