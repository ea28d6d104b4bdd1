"""Every stored column of an audit record and of a run link is covered by its hash: editing any
one of them in the database (raw SQL, as an attacker would) is caught by verify_audit. The
columns are read from the models, so a column added later is tested without being listed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from tests.support.audit import demo_run, record, tamper, verify
from traces.chain import hash_of, hash_of_link
from traces.models import AuditKind, AuditRecord, AuditRunLink

# Not content: the row's key is the database's, and ``hash`` is what the others are checked
# against (editing it alone is the "edited" case of every column below).
NOT_HASHED = {"id", "hash"}
# A record's content only its hash protects: the chain's order and links do not cover these.
CONTENT_ONLY = {"span_id", "kind", "payload", "created_at"}


def hashed_columns(model: type) -> list[str]:
    return [f.name for f in model._meta.concrete_fields if f.name not in NOT_HASHED]


def test_the_columns_only_the_hash_protects_are_columns_of_the_record():
    assert set(hashed_columns(AuditRecord)) >= CONTENT_ONLY | {"tenant", "request_id"}


def update_sql(model: type, name: str) -> str:
    column = connection.ops.quote_name(model._meta.get_field(name).column)
    # The table and column names are the models', not input.
    return f"UPDATE {model._meta.db_table} SET {column} = %s WHERE id = %s"  # noqa: S608


def other_value(row: Any, name: str) -> Any:
    """A plausible different value for column ``name`` of ``row``, as stored in SQL."""
    value = getattr(row, name)
    field = row._meta.get_field(name)
    if name == "kind":
        return next(kind for kind in AuditKind.values if kind != value)
    if name == "payload":
        return json.dumps({"edited": True, "was": value}, default=str)
    if name == "created_at":
        return connection.ops.adapt_datetimefield_value(value + timedelta(seconds=1))
    if name == "tenant":
        return "globex"
    if isinstance(value, bool):  # a link's final flag
        return not value
    if isinstance(value, int):
        return value + 1000
    assert isinstance(value, str), (name, value)
    replacement = ("f" if value[:1] != "f" else "e") + value[1:]
    return replacement[: field.max_length]


@pytest.mark.parametrize("column", hashed_columns(AuditRecord))
def test_editing_any_column_of_an_audit_record_is_detected(acme, column):
    run = demo_run(acme)
    target = record(run, 3)
    assert verify()[0]
    edited = other_value(target, column)

    tamper(update_sql(AuditRecord, column), edited, target.id)

    ok, output = verify()
    assert not ok, f"an edited {column} went unseen:\n{output}"
    if column in CONTENT_ONLY:
        assert f"BROKEN at sequence 3 (record id {target.id}, run {run})" in output
        assert "its content does not match its hash (edited)" in output


@pytest.mark.parametrize("column", hashed_columns(AuditRecord))
def test_the_record_hash_changes_with_each_column(acme, column):
    run = demo_run(acme)
    target = record(run, 3)
    original = hash_of(target)
    assert original == target.hash
    if column == "created_at":
        setattr(target, column, target.created_at + timedelta(microseconds=1))
    elif column == "payload":
        target.payload = {**target.payload, "edited": True}
    elif column == "kind":
        target.kind = next(kind for kind in AuditKind.values if kind != target.kind)
    else:
        value = getattr(target, column)
        setattr(target, column, value + 1 if isinstance(value, int) else value + "x")

    assert hash_of(target) != original


@pytest.mark.parametrize("column", hashed_columns(AuditRunLink))
def test_editing_any_column_of_a_run_link_is_detected(acme, column):
    first = demo_run(acme)
    demo_run(acme)
    link = AuditRunLink.objects.get(request_id=first)
    assert verify()[0]
    edited = other_value(link, column)

    tamper(update_sql(AuditRunLink, column), edited, link.id)

    ok, output = verify()
    assert not ok, f"an edited link {column} went unseen:\n{output}"


@pytest.mark.parametrize("column", hashed_columns(AuditRunLink))
def test_the_link_hash_changes_with_each_column(acme, column):
    link = AuditRunLink.objects.get(request_id=demo_run(acme))
    original = hash_of_link(link)
    assert original == link.hash
    value = getattr(link, column)
    if column == "created_at":
        link.created_at = value + timedelta(microseconds=1)
    else:
        setattr(link, column, _other_plain_value(value))

    assert hash_of_link(link) != original


def _other_plain_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int) else value + "x"
