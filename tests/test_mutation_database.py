"""tests/support/mutation_database.py: under mutation testing, each test session starts on the
test database as migrations left it, whatever a session stopped mid-test committed."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from tests.support.mutation_database import keep_pristine, pristine_copy, restore_pristine


def _rows(database: Path) -> list[str]:
    with closing(sqlite3.connect(database)) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM tenant ORDER BY name")]


def _commit(database: Path, statement: str) -> None:
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")  # as the test settings open it
        connection.execute(statement)
        connection.commit()


def test_rows_committed_after_the_copy_was_kept_are_gone_once_restored(tmp_path):
    database = tmp_path / "test.sqlite3"
    _commit(database, "CREATE TABLE tenant (name TEXT)")
    _commit(database, "INSERT INTO tenant VALUES ('from a migration')")
    keep_pristine(database)
    _commit(database, "INSERT INTO tenant VALUES ('left by a test stopped mid-way')")

    assert restore_pristine(database)
    assert _rows(database) == ["from a migration"]
    assert not database.with_name(database.name + "-wal").exists()


def test_the_copy_kept_first_is_kept(tmp_path):
    database = tmp_path / "test.sqlite3"
    _commit(database, "CREATE TABLE tenant (name TEXT)")
    keep_pristine(database)
    _commit(database, "INSERT INTO tenant VALUES ('a later session')")
    keep_pristine(database)

    restore_pristine(database)
    assert _rows(database) == []


def test_without_a_kept_copy_the_database_is_left_alone(tmp_path):
    database = tmp_path / "test.sqlite3"
    _commit(database, "CREATE TABLE tenant (name TEXT)")
    _commit(database, "INSERT INTO tenant VALUES ('acme')")

    assert not restore_pristine(database)
    assert _rows(database) == ["acme"]
    assert not pristine_copy(database).exists()
