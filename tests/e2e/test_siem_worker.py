"""The SIEM delivery on a real Celery worker and its beat: an HTTPS sink stopped while runs
go on and started again gets every audit record at least once, none lost, in order per run
(harness/siem/delivery.py)."""

from __future__ import annotations

import json
import time
from collections import defaultdict

from harness.models import SiemCursor
from tests.support.siem_receivers import HttpReceiver
from traces.models import AuditRecord


def run(acme, n: int) -> None:
    response = acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": f"T-{n} status?"}
    )
    assert response.status_code in (200, 202), response.content


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout_s} s for {what}")


def test_a_sink_stopped_and_started_again_gets_every_record_in_order_per_run(acme, start_worker):
    receiver = HttpReceiver().start()
    sinks = [{"name": "soc", "type": "https", "url": receiver.url, "streams": ["audit"]}]
    worker = start_worker(
        beat=True,
        env={
            "HARNESS_SIEM_SINKS": json.dumps(sinks),
            "HARNESS_SIEM_INTERVAL_S": "0.5",
            "HARNESS_SIEM_SETTLE_S": "2",
            "HARNESS_SIEM_RETRY_BASE_S": "0.5",
            "HARNESS_SIEM_RETRY_MAX_S": "2",
        },
    )
    try:
        for n in range(3):
            run(acme, n)
        wait_for(lambda: len(receiver.lines) >= 1, 60, "the first records")

        receiver.stop()  # the SIEM goes down; runs go on
        for n in range(3, 8):
            run(acme, n)
        # The failure is saved first and the lag measured just after, in the same attempt.
        wait_for(
            lambda: SiemCursor.objects.filter(
                sink="soc", failures__gt=0, lag_records__gt=0
            ).exists(),
            60,
            "a failed delivery and its lag",
        )
        lag_while_down = SiemCursor.objects.get(sink="soc").lag_records

        receiver.start()
        expected = list(AuditRecord.objects.order_by("id").values_list("id", flat=True))
        wait_for(
            lambda: {r["metadata"]["id"] for r in receiver.lines} >= set(expected),
            90,
            "every record after the restart",
        )
    finally:
        receiver.stop()
        worker.stop()

    records = receiver.lines
    assert lag_while_down > 0
    assert {r["metadata"]["id"] for r in records} == set(expected)  # none lost, none foreign
    sequences = defaultdict(list)
    for record in records:
        sequences[record["resource"]["uid"]].append(record["chain"]["sequence"])
    for run_sequences in sequences.values():
        # At least once: a batch may come twice, but never out of order within a delivery.
        first_seen = list(dict.fromkeys(run_sequences))
        assert first_seen == sorted(first_seen)
        assert set(run_sequences) == set(range(1, max(run_sequences) + 1))
    assert SiemCursor.objects.get(sink="soc").failures == 0
