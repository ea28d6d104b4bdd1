"""Under mutation testing: every test session starts on the test database as migrations left it.

mutmut runs a mutant's tests in a process of their own, and stops it at its timeout; a test
stopped in the middle (a ``transaction=True`` one) leaves the rows it committed in the reused
SQLite test database, and every later mutant's tests then fail on them: mutants counted as
killed that no test tells apart (seen: a codec name in another case "killed"). So the first
session of a run keeps a copy of the database once migrated (``<name>.pristine``), and each
session after it starts from that copy. ``scripts/mutation.py`` deletes both at the start of a
run, so that a migration added since is applied.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path


def pristine_copy(database: Path) -> Path:
    return database.with_name(database.name + ".pristine")


def restore_pristine(database: Path) -> bool:
    """Put the kept copy in place of ``database`` (before anything opens it); False if none."""
    pristine = pristine_copy(database)
    if not pristine.is_file():
        return False
    for side in ("-wal", "-shm"):  # the journal of the database being replaced
        database.with_name(database.name + side).unlink(missing_ok=True)
    staged = database.with_name(database.name + ".restoring")
    shutil.copyfile(pristine, staged)
    os.replace(staged, database)
    return True


def keep_pristine(database: Path) -> None:
    """Once ``database`` is migrated and before any test: keep a copy (if none is kept)."""
    pristine = pristine_copy(database)
    if pristine.is_file():
        return
    staged = pristine.with_name(pristine.name + ".staged")
    with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(staged)) as target:
        source.backup(target)  # a consistent copy, the write-ahead log's pages included
    os.replace(staged, pristine)
