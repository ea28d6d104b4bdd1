"""Migration 0004 turns a tenant's one chain into run chains linked in the order of each run's
last record, and refuses to re-hash (launder) a chain that does not verify."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from traces.chain import GENESIS_HASH, record_hash, sign_link, verify_chain
from traces.models import AuditChainHead, AuditRecord, AuditRunLink

BEFORE = [("traces", "0003_policy_decision_audit_kind")]
AFTER = "every app at its latest migration"
RUN_A, RUN_B = "a" * 32, "b" * 32
HASHED = (
    "tenant",
    "sequence",
    "prev_hash",
    "request_id",
    "span_id",
    "kind",
    "payload",
    "created_at",
)


def migrate(targets):
    executor = MigrationExecutor(connection)
    if targets == AFTER:  # back to the schema the other tests expect, later migrations too
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_chain(transactional_db):
    """acme's records as the previous release chained them: one chain, runs interleaved."""
    apps = migrate(BEFORE)
    Record = apps.get_model("traces", "AuditRecord")
    Head = apps.get_model("traces", "AuditChainHead")
    start = timezone.now() - timedelta(minutes=5)
    order = [RUN_A, RUN_B, RUN_A, RUN_B, RUN_A]  # B's last record comes before A's
    for sequence, run in enumerate(order, start=1):
        Record.objects.create(
            tenant="acme",
            sequence=sequence,
            request_id=run,
            span_id=f"{sequence:016x}",
            kind="tool_io",
            payload={"n": sequence, "zero": -0.0, "big": 1e16},
            created_at=start + timedelta(seconds=sequence),
        )
    # Chained over what the database gives back, as the previous release's verify_audit read it.
    prev_hash = GENESIS_HASH
    for row in Record.objects.filter(tenant="acme").order_by("sequence"):
        row.prev_hash = prev_hash
        row.hash = record_hash(**{field: getattr(row, field) for field in HASHED})
        row.save(update_fields=["prev_hash", "hash"])
        prev_hash = row.hash
    Head.objects.create(
        tenant="acme",
        sequence=len(order),
        hash=prev_hash,
        signature=sign_link("head", "acme", len(order), prev_hash),
    )
    yield Record
    migrate(AFTER)


def test_a_tenant_chain_becomes_run_chains_linked_by_each_runs_last_record(old_chain):
    migrate(AFTER)

    report = verify_chain("acme")
    assert report.ok, report.broken
    assert (report.checked, report.runs, report.links) == (5, 2, 2)
    assert list(
        AuditRecord.objects.filter(request_id=RUN_A).values_list("sequence", "span_id")
    ) == [(1, f"{1:016x}"), (2, f"{3:016x}"), (3, f"{5:016x}")]
    links = list(AuditRunLink.objects.filter(tenant="acme").order_by("sequence"))
    assert [(link.request_id, link.run_sequence) for link in links] == [(RUN_B, 2), (RUN_A, 3)]
    assert AuditChainHead.objects.get(tenant="acme").hash == links[-1].hash
    payload = AuditRecord.objects.get(request_id=RUN_A, sequence=1).payload
    assert payload == {"n": 1, "zero": 0.0, "big": 10_000_000_000_000_000}


def test_a_tampered_chain_stops_the_migration_until_its_evidence_is_saved(old_chain, monkeypatch):
    old_chain.objects.filter(sequence=3).update(payload={"edited": True})

    with pytest.raises(RuntimeError, match=r"acme: record 3 .* does not match its hash"):
        migrate(AFTER)

    monkeypatch.setenv("HARNESS_AUDIT_MIGRATE_BROKEN_CHAINS", "1")
    migrate(AFTER)
    assert AuditRunLink.objects.filter(tenant="acme").count() == 2
