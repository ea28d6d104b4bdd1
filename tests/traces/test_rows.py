"""Appended rows: one INSERT without reading back, and writes sent in one round trip."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from traces.models import Fingerprint, Span
from traces.rows import insert_rows, sent_together

pytestmark = pytest.mark.django_db(transaction=True)


def span(sequence: int, **fields) -> Span:
    now = timezone.now()
    values = {
        "request_id": "r" * 32,
        "tenant": "acme",
        "span_id": f"{sequence:016x}",
        "sequence": sequence,
        "kind": "tool_call",
        "name": f"call {sequence}",
        "started_at": now,
        "ended_at": now + timedelta(milliseconds=5),
        "duration_ms": 5.0,
    }
    return Span(**(values | fields))


def test_rows_are_written_whole_in_one_statement():
    rows = [span(1, attributes={"tool": "get_ticket", "n": [1, 2.5, None]}), span(2)]

    with CaptureQueriesContext(connection) as queries:
        insert_rows(rows)

    assert len(queries) == 1
    assert "RETURNING" not in queries[0]["sql"].upper()
    stored = list(Span.objects.order_by("sequence"))
    assert [s.name for s in stored] == ["call 1", "call 2"]
    assert stored[0].attributes == {"tool": "get_ticket", "n": [1, 2.5, None]}
    assert stored[1].attributes == {}  # the model's default
    assert stored[0].started_at == rows[0].started_at
    assert stored[0].status == "ok"


def test_many_rows_go_in_batches_the_database_accepts():
    rows = [
        Fingerprint(request_id="r" * 32, tenant="acme", kind="email", digest=f"{n:064x}")
        for n in range(7000)  # 35,000 parameters: above PostgreSQL's and SQLite's limits
    ]

    insert_rows(rows)

    assert Fingerprint.objects.count() == 7000


def test_conflicting_rows_can_be_skipped():
    first = Fingerprint(request_id="r" * 32, tenant="acme", kind="email", digest="d" * 64)
    insert_rows([first])

    again = Fingerprint(request_id="r" * 32, tenant="acme", kind="email", digest="d" * 64)
    insert_rows([again], ignore_conflicts=True)

    assert Fingerprint.objects.count() == 1
    with pytest.raises(IntegrityError):
        insert_rows([again])


def test_writes_sent_together_fail_as_one_and_leave_nothing():
    insert_rows([span(1)])

    def step() -> None:
        with transaction.atomic(), sent_together():
            insert_rows([span(2)])
            insert_rows([span(1)])  # the same span id: refused when the results come back

    with pytest.raises(IntegrityError):
        step()

    assert list(Span.objects.values_list("sequence", flat=True)) == [1]


def test_writes_sent_together_are_committed_with_their_transaction():
    with transaction.atomic(), sent_together():
        insert_rows([span(1)])
        insert_rows([Fingerprint(request_id="r" * 32, tenant="acme", kind="e", digest="d")])

    assert Span.objects.count() == 1
    assert Fingerprint.objects.count() == 1


def test_the_count_of_rows_inserted_is_returned_and_a_named_constraint_alone_is_skipped():
    row = dict(request_id="r" * 32, tenant="acme", kind="email", digest="d" * 64)
    assert insert_rows([Fingerprint(**row), Fingerprint(**{**row, "digest": "e" * 64})]) == 2

    skipped = insert_rows(
        [Fingerprint(**row)],
        ignore_conflicts=True,
        unique_fields=("request_id", "kind", "digest"),
    )

    assert skipped == 0
    assert Fingerprint.objects.count() == 2


def test_a_conflict_on_another_constraint_than_the_named_one_is_an_error():
    insert_rows([span(1)])
    same_span_id = span(2, span_id=f"{1:016x}")  # span_id is unique, sequence is not taken

    with pytest.raises(IntegrityError):
        insert_rows([same_span_id], ignore_conflicts=True, unique_fields=("request_id", "sequence"))


@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")
def test_values_go_to_the_database_as_djangos_own_save_would_send_them():
    """Plain values of plain fields skip Django's conversion (it would give them back as they
    are); anything else takes it: the parameters are the same either way."""
    from django.utils.translation import gettext_lazy

    from traces.models import SpanKind
    from traces.rows import _preparers, _statement

    rows = [
        span(1, attributes={"a": [1, 2.5]}),
        span(2, span_id="b" * 16, duration_ms=5, kind=SpanKind.TOOL_CALL, name=gettext_lazy("x")),
        span(3, parent_span_id=None, duration_ms=True, status=None),
        span(4, started_at=timezone.now().replace(tzinfo=None), attributes=[]),
    ]
    fields, _head, _row = _statement(Span, connection.vendor)
    preparers = _preparers(Span, connection.vendor)
    for row in rows:
        fast = [prepare(row, connection) for prepare in preparers]
        django = [field.get_db_prep_save(field.pre_save(row, True), connection) for field in fields]
        assert [repr(value) for value in fast] == [repr(value) for value in django]
        assert [type(value) for value in fast] == [type(value) for value in django]

    rows[1].sequence = "2"  # a string for an integer column: converted, as Django would
    fast = [prepare(rows[1], connection) for prepare in preparers]
    assert fast[fields.index(Span._meta.get_field("sequence"))] == 2

    insert_rows(rows[:2])
    stored = list(Span.objects.order_by("sequence"))
    assert (stored[1].sequence, stored[1].duration_ms, stored[1].name) == (2, 5.0, "x")


def test_a_new_row_is_what_the_models_own_constructor_makes():
    from harness.models import RunEvent
    from traces.rows import new_row

    values = {
        "request_id": "r" * 32,
        "tenant": "acme",
        "span_id": "a" * 16,
        "sequence": 1,
        "kind": "tool_call",
        "name": "call",
        "started_at": timezone.now(),
        "ended_at": timezone.now(),
        "duration_ms": 1.0,
    }
    fast, django = new_row(Span, **values), Span(**values)
    fields = [f.attname for f in Span._meta.concrete_fields]
    assert [getattr(fast, f) for f in fields] == [getattr(django, f) for f in fields]
    assert fast.status == "ok"  # a default
    assert new_row(Span, **values).attributes is not fast.attributes  # a fresh dict each

    event = new_row(RunEvent, run_id=None, sequence=1, type="x")
    assert event.data == {}
    assert event.run_id is None

    with pytest.raises(TypeError, match="has no field colour"):
        new_row(Span, colour="red", **values)
    with pytest.raises(TypeError, match="has no field run"):
        new_row(RunEvent, run=None, sequence=1, type="x")  # attribute names only: run_id
