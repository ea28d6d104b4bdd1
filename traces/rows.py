"""Appending rows without reading anything back, and sending such writes together.

The run engine appends a step's messages, events, spans and audit records; nothing reads their
ids. ``bulk_create`` would ask PostgreSQL for them (``RETURNING id``) and, for several rows,
send every column as an array for ``UNNEST`` (quoted element by element in Python: a
millisecond a step). ``insert_rows`` writes one plain ``INSERT … VALUES (…), (…)`` instead.

``sent_together`` puts such writes in psycopg's pipeline mode on PostgreSQL: they go to the
server in one round trip and their results (errors included) arrive at the end of the block.
Only statements whose results nobody reads belong in it — in pipeline mode a cursor's
``rowcount`` is -1 until the results arrive.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model
from django.db.models.base import ModelState

M = TypeVar("M", bound=Model)


def insert_rows(
    objs: Sequence[Model], ignore_conflicts: bool = False, unique_fields: Sequence[str] = ()
) -> int:
    """One multi-row INSERT of ``objs`` (instances of one model), ids left to the database.
    ``ignore_conflicts``: rows that would break a unique constraint (the one on
    ``unique_fields`` only, when named) are skipped. Returns how many rows went in — inside
    ``sent_together`` that is not known yet: -1."""
    if not objs:
        return 0
    meta = type(objs[0])._meta
    fields, head, row = _statement(type(objs[0]), connection.vendor)
    preparers = _preparers(type(objs[0]), connection.vendor)
    database = connections[DEFAULT_DB_ALIAS]  # not the thread-local proxy: looked up once
    quote = connection.ops.quote_name
    target = f" ({', '.join(quote(meta.get_field(name).column) for name in unique_fields)})"
    tail = f" ON CONFLICT{target if unique_fields else ''} DO NOTHING" if ignore_conflicts else ""
    size = connection.ops.bulk_batch_size(fields, objs) or len(objs)
    inserted = 0
    with connection.cursor() as cursor:
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = [prepare(obj, database) for obj in batch for prepare in preparers]
            cursor.execute(f"{head}{', '.join([row] * len(batch))}{tail}", params)
            if cursor.rowcount < 0:
                inserted = -1
            elif inserted >= 0:
                inserted += cursor.rowcount
    return inserted


def new_row(model: type[M], **values: Any) -> M:
    """An unsaved ``model`` row for ``insert_rows``, as ``model(**values)`` would make it (the
    other fields get their defaults), without Django's ``__init__``: its signals and per-field
    argument handling cost more than the rest of writing the row. ``values`` are keyed by
    attribute name (``run_id``, not ``run``). Raises ``TypeError`` for an unknown name."""
    attnames, defaults = _row_layout(model)
    unknown = values.keys() - attnames
    if unknown:
        raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    obj = model.__new__(model)
    obj._state = ModelState()
    state = obj.__dict__
    for attname, field in defaults:
        if attname not in values:
            state[attname] = field.get_default()
    state.update(values)
    return obj


@cache
def _row_layout(model: type[Model]) -> tuple[frozenset[str], list[tuple[str, Any]]]:
    fields = list(model._meta.concrete_fields)
    return frozenset(f.attname for f in fields), [(f.attname, f) for f in fields]


@cache
def _statement(model: type[Model], vendor: str) -> tuple[list[Any], str, str]:
    """The model's written fields, the INSERT's head and one row's placeholders: the same for
    every step, so made once per model (and database vendor, whose quoting they use)."""
    meta = model._meta
    fields = [
        field
        for field in meta.local_concrete_fields
        if field is not meta.auto_field and not getattr(field, "generated", False)
    ]
    quote = connection.ops.quote_name
    head = (
        f"INSERT INTO {quote(meta.db_table)} "  # noqa: S608 (names from the model)
        f"({', '.join(quote(field.column) for field in fields)}) VALUES "
    )
    return fields, head, f"({', '.join(['%s'] * len(fields))})"


# Field types whose value of the listed Python type Django's get_db_prep_save gives back as
# it is (any str, choices included; bool(), float() of it), or only adapted as an integer of
# its column's size, or (an aware datetime) as the database's datetime.
_PASSED_AS_IS: dict[str, tuple[type, ...]] = {
    "BooleanField": (bool,),
    "FloatField": (float,),
}
_TEXTS = frozenset({"CharField", "TextField"})
_INTEGERS = frozenset(
    {
        "IntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "PositiveIntegerField",
        "PositiveBigIntegerField",
        "PositiveSmallIntegerField",
    }
)


@cache
def _preparers(model: type[Model], vendor: str) -> list[Any]:
    """For each written field, a function of a row (and the connection) giving its database
    value: Django's ``get_db_prep_save(pre_save(...))``, shortened for plain values of plain
    fields (a step inserts ~120 values; the full path costs a few microseconds each)."""
    fields, _head, _row = _statement(model, vendor)
    return [_preparer(field) for field in fields]


def _preparer(field: Any) -> Any:
    def prepare(obj: Model, database: Any) -> Any:
        return field.get_db_prep_save(field.pre_save(obj, True), database)

    name = type(field).__name__
    if not _unchanged_django_field(field):
        return prepare
    attname = field.attname
    if name in _INTEGERS:

        def prepare_integer(obj: Model, database: Any) -> Any:
            value = getattr(obj, attname)
            if type(value) is int:
                return database.ops.adapt_integerfield_value(value, name)
            return prepare(obj, database)

        return prepare_integer
    if name in _TEXTS:

        def prepare_text(obj: Model, database: Any) -> Any:
            value = getattr(obj, attname)
            if value is None or isinstance(value, str):
                return value
            return prepare(obj, database)

        return prepare_text
    if name == "DateTimeField" and not (field.auto_now or field.auto_now_add):

        def prepare_datetime(obj: Model, database: Any) -> Any:
            value = getattr(obj, attname)
            if type(value) is datetime and value.tzinfo is not None:
                return database.ops.adapt_datetimefield_value(value)
            return prepare(obj, database)

        return prepare_datetime
    plain = _PASSED_AS_IS.get(name)
    if plain is None:
        return prepare

    def prepare_plain(obj: Model, database: Any) -> Any:
        value = getattr(obj, attname)
        if value is None or type(value) in plain:
            return value
        return prepare(obj, database)

    return prepare_plain


def _unchanged_django_field(field: Any) -> bool:
    """``field`` is exactly Django's class of its name (no subclass changing how values are
    saved, or ``pre_save``)."""
    from django.db.models import fields as django_fields

    return type(field) is getattr(django_fields, type(field).__name__, None)


@contextmanager
def sent_together() -> Iterator[None]:
    """Writes in this block travel in one round trip (PostgreSQL); elsewhere a no-op."""
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield
