"""The tables every step inserts into carry no index that another already covers.

Each index costs each insert (a step writes spans, audit records, events, messages and tool
executions). An index on ``run`` beside a unique ``(run, sequence)`` serves no lookup the
unique one does not; nor do the LIKE indexes that Django's ``db_index``/``unique`` add to a
CharField on PostgreSQL, since nothing searches these columns by prefix.
"""

import pytest
from django.db import connection

HOT_TABLES = [
    "traces_span",
    "traces_auditrecord",
    "harness_runevent",
    "harness_runmessage",
    "tools_toolexecution",
]


def _indexes(table: str) -> dict[str, dict]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {
        name: info
        for name, info in constraints.items()
        if (info["index"] or info["unique"]) and not info["primary_key"] and info["columns"]
    }


@pytest.mark.django_db
@pytest.mark.parametrize("table", HOT_TABLES)
def test_no_index_is_a_leading_part_of_a_unique_one(table):
    indexes = _indexes(table)
    uniques = [info["columns"] for info in indexes.values() if info["unique"]]
    redundant = [
        name
        for name, info in indexes.items()
        for columns in uniques
        if len(info["columns"]) < len(columns)
        and columns[: len(info["columns"])] == info["columns"]
    ]
    assert redundant == []


@pytest.mark.django_db
@pytest.mark.parametrize("table", HOT_TABLES)
def test_no_two_indexes_on_the_same_columns(table):
    columns = [tuple(info["columns"]) for info in _indexes(table).values()]
    assert len(columns) == len(set(columns)), columns


@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="LIKE indexes are PostgreSQL's")
@pytest.mark.parametrize("table", HOT_TABLES)
def test_no_like_index(table):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [table, "%pattern_ops%"],
        )
        assert cursor.fetchall() == []


@pytest.mark.django_db
def test_what_the_engine_looks_up_is_still_indexed():
    """Lookups by run and by tenant, and the uniqueness the engine relies on, remain."""
    expected = {
        "traces_span": [["request_id", "sequence"], ["span_id"], ["tenant"]],
        "traces_auditrecord": [["request_id", "sequence"], ["tenant"]],
        "harness_runevent": [["run_id", "sequence"]],
        "harness_runmessage": [["run_id", "index"]],
        "tools_toolexecution": [["idempotency_key"], ["tenant", "started_at"]],
    }
    for table, wanted in expected.items():
        present = sorted(info["columns"] for info in _indexes(table).values())
        assert present == sorted(wanted), table
