"""A run whose audit records were deleted while its model-call spans remain is reported as
missing its audit (``verify_audit``: "the audit chain is missing"), and a link row put where
the verification never looks (at or before the tenant's checkpoint, link 0 without one) does
not hide it: only a run's records stand for its audit (found by the mutation work,
docs/mutation.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.audit import tamper
from tests.traces.test_audit_chain_breaks import spans_without_audit, write_run
from traces.chain import ChainBreak, verify_chain
from traces.services import delete_expired_traces

pytestmark = pytest.mark.django_db


def forged_link(request_id: str, sequence: int) -> None:
    now = timezone.now().isoformat()
    tamper(
        "INSERT INTO traces_auditrunlink (tenant, sequence, prev_hash, request_id, run_sequence, "
        "run_hash, hash, created_at, final) VALUES ('acme', %s, %s, %s, 1, %s, %s, %s, %s)",
        sequence,
        "0" * 64,
        request_id,
        "1" * 64,
        "2" * 64,
        now,
        False,
    )


def missing(request_id: str) -> ChainBreak:
    return ChainBreak(
        0,
        f"runs with model calls have no audit records (the audit chain is missing): {request_id}",
        request_id=request_id,
        level="tenant",
    )


@pytest.mark.parametrize("after_retention", [False, True], ids=["from-genesis", "checkpoint"])
def test_a_link_where_verification_never_looks_does_not_hide_a_runs_deleted_audit(
    after_retention,
):
    if after_retention:  # links 1 and 2 deleted by retention: the checkpoint is at link 2
        long_ago = timezone.now() - timedelta(days=1000)
        write_run(1, created_at=long_ago)
        write_run(2, created_at=long_ago)
        delete_expired_traces(now=timezone.now())
    write_run(3)
    [gone] = spans_without_audit(1, first=4)  # its records deleted, its model call's span kept
    assert verify_chain("acme").broken == missing(gone)

    forged_link(gone, 2 if after_retention else 0)

    assert verify_chain("acme").broken == missing(gone)
