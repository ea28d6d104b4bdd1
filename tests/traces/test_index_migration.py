"""The migrations that drop the write path's redundant indexes keep every row, and on
PostgreSQL rebuild nothing: the indexes kept are renamed (same index, same relation), the
foreign keys left alone. Unapplied, they give back the indexes as they were."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [
    ("traces", "0006_tenant_masking_patterns"),
    ("tools", "0002_tool_execution_started_at_set_by_writer"),
    ("harness", "0005_run_plans"),
]
TABLES = (
    "traces_span",
    "traces_auditrecord",
    "harness_runevent",
    "harness_runmessage",
    "tools_toolexecution",
)
on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="renaming in place is what PostgreSQL does"
)


def migrate(targets):
    executor = MigrationExecutor(connection)
    if targets is None:  # back to the schema the other tests expect
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def relations() -> dict[str, int]:
    """Every index and constraint of the tables, by name, with its object id."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid::regclass::text = ANY(%s) "
            "UNION ALL SELECT conname, oid FROM pg_constraint "
            "WHERE conrelid::regclass::text = ANY(%s) AND contype = 'f'",
            [list(TABLES), list(TABLES)],
        )
        return dict(cursor.fetchall())


@pytest.fixture
def before(transactional_db):
    apps = migrate(BEFORE)
    Span = apps.get_model("traces", "Span")
    now = timezone.now()
    Span.objects.create(
        request_id="r" * 32,
        tenant="acme",
        span_id="a" * 16,
        sequence=1,
        kind="tool_call",
        name="call",
        started_at=now,
        ended_at=now,
        duration_ms=1.0,
    )
    yield apps
    migrate(None)


@on_postgresql
def test_the_indexes_kept_are_renamed_not_rebuilt(before):
    old = relations()
    assert len([name for name in old if not name.endswith("_fk_harness_run_id")]) == 24

    migrate(None)
    new = relations()

    renamed = {
        "traces_auditrecord_tenant_ea377457": "audit_tenant",
        "traces_span_tenant_f28d882e": "span_tenant",
        "traces_span_span_id_key": "span_unique_span_id",
        "tools_toolexecution_idempotency_key_key": "tool_execution_unique_key",
    }
    for was, now in renamed.items():
        assert new[now] == old[was], now  # the same index under its new name
    for key in ("harness_runevent_run_id_a9a6daa6", "harness_runmessage_run_id_dd91e9ef"):
        assert new[f"{key}_fk_harness_run_id"] == old[f"{key}_fk_harness_run_id"]
    kept = {name for name in new if not name.endswith("_fk_harness_run_id")}
    assert len(kept) == 14
    assert kept - set(renamed.values()) <= set(old)  # nothing else is new


@on_postgresql
def test_unapplied_they_give_back_the_indexes_as_they_were(before):
    old = set(relations())
    migrate(None)

    migrate(BEFORE)

    assert set(relations()) == old


def test_rows_are_kept_and_the_unique_keys_still_hold(before):
    from django.db import IntegrityError, transaction

    from traces.models import Span

    migrate(None)

    assert Span.objects.get(span_id="a" * 16).name == "call"
    duplicate = Span.objects.get(span_id="a" * 16)
    duplicate.pk, duplicate.sequence = None, 2
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()
