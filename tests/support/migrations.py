"""Moving the test database's schema back and forth, for tests of data migrations."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]] | None) -> Any:
    """Migrate to ``targets`` (None: every app's latest, the schema other tests expect) and
    return the historical apps registry at that state."""
    executor = MigrationExecutor(connection)
    if targets is None:
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps
