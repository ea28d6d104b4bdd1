"""A migration operation for dropping indexes from big tables without rebuilding any.

When an index loses ``db_index``/``unique`` for an explicit ``Index``/``UniqueConstraint`` on
the same column, Django drops the old index and builds the new one. On a table of millions of
audit records or spans that is minutes of a lock that stops every run writing. The index it
would build is the one it drops, under another name: on PostgreSQL, ``PostgresSQL`` renames it
instead (and drops what is redundant), which takes no time. Elsewhere (SQLite, whose tables
are rebuilt on any such change anyway) Django's own operations run.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


class PostgresSQL(migrations.SeparateDatabaseAndState):
    """``operations`` for the project state and for other databases; ``forwards`` (SQL
    statements) instead of them on PostgreSQL, ``backwards`` when unapplied there."""

    def __init__(self, operations: list[Any], forwards: list[str], backwards: list[str]) -> None:
        super().__init__(state_operations=operations, database_operations=operations)
        self.forwards = forwards
        self.backwards = backwards

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {
            "operations": self.state_operations,
            "forwards": self.forwards,
            "backwards": self.backwards,
        }
        return self.__class__.__qualname__, [], kwargs

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        for statement in self.forwards:
            schema_editor.execute(statement)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor != "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
            return
        for statement in self.backwards:
            schema_editor.execute(statement)

    def describe(self) -> str:
        return "Indexes: " + "; ".join(operation.describe() for operation in self.state_operations)


def rename_index(table: str, column: str, old: str, new: str) -> list[str]:
    """PostgreSQL: index ``old`` on ``table``'s ``column`` renamed ``new`` (built only if
    there was none to rename)."""
    return [
        f'ALTER INDEX IF EXISTS "{old}" RENAME TO "{new}"',
        f'CREATE INDEX IF NOT EXISTS "{new}" ON "{table}" ("{column}")',
    ]


def rename_unique(table: str, column: str, old: str, new: str) -> str:
    """PostgreSQL: unique constraint ``old`` on ``table``'s ``column`` renamed ``new`` (with
    its index; added only if there was none to rename)."""
    return (
        "DO $$ BEGIN "  # noqa: S608 (names written in the migrations, not input)
        f"IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = '{old}' "
        f"AND conrelid = '{table}'::regclass) THEN "
        f'ALTER TABLE "{table}" RENAME CONSTRAINT "{old}" TO "{new}"; '
        f"ELSIF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = '{new}' "
        f"AND conrelid = '{table}'::regclass) THEN "
        f'ALTER TABLE "{table}" ADD CONSTRAINT "{new}" UNIQUE ("{column}"); '
        "END IF; END $$"
    )
