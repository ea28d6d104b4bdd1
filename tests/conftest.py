"""Shared fixtures. The tier (embedded or PostgreSQL/Redis) follows the environment."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from hypothesis import Phase
from hypothesis import settings as hypothesis_settings

from harness.api_keys import create_api_key
from harness.demo import load_demo
from tests.support import mutation_database

# The console's single sign-on fixtures (a real OpenID Provider): oidc_provider, sso.
pytest_plugins = ["tests.support.oidc"]

# ``scripts/mutation.py`` runs the selected tests against each mutant with this profile: a
# failing example is not shrunk (the first one kills the mutant; shrinking it costs many more
# runs of the test). Examples tried, and how many, are unchanged.
hypothesis_settings.register_profile(
    "mutation", phases=(Phase.explicit, Phase.reuse, Phase.generate)
)
if os.environ.get("HARNESS_HYPOTHESIS_PROFILE"):
    hypothesis_settings.load_profile(os.environ["HARNESS_HYPOTHESIS_PROFILE"])

# What the masker keeps for the process besides its functions' lru caches (region shapes,
# label verdicts).
_MASKER_MEMOS = {
    "traces.masking.phones": ("_GROUPS_OF", "_SHAPES"),
    "traces.masking.phone_validator": (),
    "traces.masking.kinds": (),
    "traces.masking.checks": (),
    "traces.masking.numbers": ("_LABELLED",),
}


@pytest.fixture(autouse=os.environ.get("HARNESS_HYPOTHESIS_PROFILE") == "mutation")
def _masker_memos_start_empty():
    """Under mutation testing only: each test starts without what the masker remembers for
    the process. mutmut records which tests reach a function by running them all in one
    process; a function whose result is kept (``RegionRules``, built once per region) was
    recorded for the first test that called it only, and each of its mutants was tried
    against that test alone (docs/mutation.md)."""
    import importlib

    for name, memos in _MASKER_MEMOS.items():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
        for memo in memos:
            getattr(module, memo).clear()


def _mutation_test_database() -> Path | None:
    """The SQLite test database, under mutation testing only (``scripts/mutation.py``)."""
    if os.environ.get("HARNESS_HYPOTHESIS_PROFILE") != "mutation":
        return None
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return None
    return Path(database["TEST"]["NAME"])


def pytest_configure(config: pytest.Config) -> None:
    if (database := _mutation_test_database()) is not None:
        mutation_database.restore_pristine(database)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, then (under mutation testing) a copy of the migrated database kept for
    the sessions after this one (tests/support/mutation_database.py)."""
    if (database := _mutation_test_database()) is not None:
        mutation_database.keep_pristine(database)


@pytest.hookimpl(tryfirst=True)  # before pytest-django's, which keeps this order in its groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``scripts/mutation.py`` only: a mutant's tests run the fastest first (their times in
    mutmut's stats, ``HARNESS_MUTATION_TEST_TIMES``), so that a mutant a fast test kills stops
    early (mutmut stops at the first failure, and hands pytest the tests in a set's order, which
    changes from one process to the next). Which tests run is unchanged."""
    times_file = os.environ.get("HARNESS_MUTATION_TEST_TIMES")
    if not times_file or not Path(times_file).is_file():
        return
    times = json.loads(Path(times_file).read_text(encoding="utf-8")).get("duration_by_test", {})
    items.sort(key=lambda item: times.get(item.nodeid, 0.0))


def describe_tier() -> str:
    engine = settings.DATABASES["default"]["ENGINE"]
    database = "PostgreSQL" if "postgresql" in engine else "SQLite"
    broker = settings.CELERY_BROKER_URL.split(":", 1)[0]
    broker_name = "Redis" if broker.startswith("redis") else "filesystem broker"
    tier = "PostgreSQL/Redis" if database == "PostgreSQL" and broker_name == "Redis" else "embedded"
    return f"tier: {tier} (database {database}, {broker_name})"


def pytest_report_header(config: pytest.Config) -> str:
    return describe_tier()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"Harness test {describe_tier()}")


@dataclass
class ApiClient:
    """A tenant's HTTP client: JSON in, JSON out, authenticated with its API key."""

    client: Client
    key: str

    def post(self, path: str, body: Any, **headers: str) -> Any:
        data = body if isinstance(body, str) else json.dumps(body)
        return self.client.post(
            path,
            data=data,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {self.key}",
            **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()},
        )

    def get(self, path: str, **headers: str) -> Any:
        return self.client.get(
            path, HTTP_AUTHORIZATION=f"Bearer {self.key}", **_meta_headers(headers)
        )

    def send(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        """Any method with a JSON body (``patch``, ``delete``…)."""
        return getattr(self.client, method)(
            path,
            data=json.dumps(body) if body is not None else "",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {self.key}",
            **_meta_headers(headers),
        )


def _meta_headers(headers: dict[str, str]) -> dict[str, str]:
    return {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}


@pytest.fixture(autouse=True)
def _shared_limits_start_empty(settings: Any) -> None:
    """Limits kept in Redis outlive a test's database: start each test without them."""
    if settings.REDIS_URL:
        from policy.services import clear_limits

        clear_limits()


@pytest.fixture(autouse=True)
def _no_kept_tool_outcome_from_an_earlier_test():
    """Tool outcomes kept in memory (not stored yet) belong to the test that made them."""
    from tools.executor import forget_kept_outcomes

    forget_kept_outcomes()


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test():
    """Runs driven inline in threads finish before the test's data is flushed."""
    yield
    from harness.runs import wait_for_inline_runs

    assert wait_for_inline_runs(timeout_s=30), "an inline run was still going after 30 s"


@pytest.fixture
def demo(transactional_db: None) -> None:
    """The demo data set, committed (tool handlers run on their own connections)."""
    load_demo(admin_password="test-admin-password")


@pytest.fixture
def acme(demo: None) -> ApiClient:
    return ApiClient(Client(), create_api_key("acme", "tests").secret)


@pytest.fixture
def globex(demo: None) -> ApiClient:
    return ApiClient(Client(), create_api_key("globex", "tests").secret)


def _extra_folder(tmp_path: Path, settings: Any, name: str, setting: str) -> Path:
    """``tmp_path / name``, added to the list setting ``setting`` for this test."""
    folder = tmp_path / name
    folder.mkdir()
    setattr(settings, setting, [*getattr(settings, setting), folder])
    return folder


@pytest.fixture
def agent_dir(tmp_path: Path, settings: Any) -> Path:
    """A folder of extra agent files, added to HARNESS_AGENT_DIRS for this test."""
    return _extra_folder(tmp_path, settings, "agents", "HARNESS_AGENT_DIRS")


@pytest.fixture
def tool_dir(tmp_path: Path, settings: Any) -> Path:
    """A folder of extra tool files, added to HARNESS_TOOL_DIRS for this test."""
    return _extra_folder(tmp_path, settings, "tool-files", "HARNESS_TOOL_DIRS")


@pytest.fixture
def start_worker(transactional_db: None, tmp_path: Path):
    """Start real worker processes on the tests' queue (any number); all stopped after."""
    from harness.celery import app
    from tests.worker import WorkerProcess

    app.control.purge()
    workers: list[WorkerProcess] = []

    def start(**options: Any) -> WorkerProcess:
        worker = WorkerProcess(tmp_path / f"worker-{len(workers)}.log", **options)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture
def celery_worker(start_worker):
    """One real worker process consuming the tests' queue."""
    return start_worker()
