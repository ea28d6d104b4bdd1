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
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Model


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
    quote = connection.ops.quote_name
    target = f" ({', '.join(quote(meta.get_field(name).column) for name in unique_fields)})"
    tail = f" ON CONFLICT{target if unique_fields else ''} DO NOTHING" if ignore_conflicts else ""
    size = connection.ops.bulk_batch_size(fields, objs) or len(objs)
    inserted = 0
    with connection.cursor() as cursor:
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = [
                field.get_db_prep_save(field.pre_save(obj, True), connection)
                for obj in batch
                for field in fields
            ]
            cursor.execute(f"{head}{', '.join([row] * len(batch))}{tail}", params)
            if cursor.rowcount < 0:
                inserted = -1
            elif inserted >= 0:
                inserted += cursor.rowcount
    return inserted


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


@contextmanager
def sent_together() -> Iterator[None]:
    """Writes in this block travel in one round trip (PostgreSQL); elsewhere a no-op."""
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield
