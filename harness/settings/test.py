"""Test settings: the base settings with the environment's database and broker.

The tier is chosen by the environment exactly as in production: with ``DATABASE_URL`` and
``REDIS_URL`` set the suite runs on PostgreSQL and Redis, without them on SQLite and the
filesystem broker.
"""

from harness.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not memory: tool handlers and worker processes open their own connections and
    # must see the same database the test wrote.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-harness.sqlite3")}  # noqa: F405

# Tests' tasks go to their own queue (and folder), so a `make run` worker on the same machine
# never takes them, and messages left by an earlier session are not replayed.
CELERY_TASK_DEFAULT_QUEUE = "harness-tests"
if CELERY_BROKER_URL.startswith("filesystem://"):  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(  # noqa: F405
        VAR_DIR / "celery-broker-tests"  # noqa: F405
    )

# The demo's MCP configuration is never a test's default (a test names its servers); the one
# ``load_demo`` writes in tests goes beside the development copy, not over it.
DEMO_MCP_CONFIG = VAR_DIR / "test-demo-mcp-servers.json"  # noqa: F405
HARNESS_MCP_CONFIG = env_str("HARNESS_MCP_CONFIG")  # noqa: F405

# Tests call back receivers they start on loopback.
HARNESS_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
HARNESS_WEBHOOK_RETRY_SCHEDULE_S = [0.5, 1.0, 2.0]
# Worker processes started by tests also need the test-only tools.
HARNESS_TOOL_DIRS = [*HARNESS_TOOL_DIRS, BASE_DIR / "tests" / "support" / "tools"]  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    # Tests commit thousands of tiny transactions; waiting for each WAL flush only measures
    # the disk. Durability after a crash of the test database is of no interest.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"  # noqa: F405
