"""Settings for every environment: embedded defaults, overridden by the environment.

With no environment set, Harness runs on SQLite under ``var/``, a Celery broker on the local
filesystem, the scripted demo model and the demo ticket tools. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis with no code change.
"""

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from harness.settings.env import (
    derive_key,
    env_bool,
    env_float,
    env_group_map,
    env_int,
    env_int_list,
    env_int_or_off,
    env_json,
    env_keys,
    env_list,
    env_paths,
    env_prefixed,
    env_str,
    hkdf,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("HARNESS_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _embedded_secret_key() -> str:
    """A key generated once per checkout, so the embedded default needs no configuration."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50), encoding="utf-8")
        key_file.chmod(0o600)
    return key_file.read_text(encoding="utf-8").strip()


SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _embedded_secret_key()
DEBUG = env_bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS") or ["localhost", "127.0.0.1", "[::1]"]
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# --- HTTPS (docs/configuration.md; docker-compose turns them on) ----------------------------
# Behind a TLS-terminating proxy: the header it sets and the value meaning https, e.g.
# DJANGO_SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto:https. Trust it only if the proxy always
# sets (or strips) that header.
_PROXY_SSL_HEADER = env_str("DJANGO_SECURE_PROXY_SSL_HEADER")
if _PROXY_SSL_HEADER:
    _header, _, _value = _PROXY_SSL_HEADER.partition(":")
    if not _header.strip() or not _value.strip():
        raise ImproperlyConfigured(
            f"DJANGO_SECURE_PROXY_SSL_HEADER={_PROXY_SSL_HEADER!r}: use HEADER:VALUE, "
            "e.g. X-Forwarded-Proto:https"
        )
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + _header.strip().upper().replace("-", "_"),
        _value.strip(),
    )
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
# The container health check calls /healthz over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", default=False)

INSTALLED_APPS = [
    "harness.console.apps.HarnessAdminConfig",  # django.contrib.admin, every page tenant-scoped
    "django.contrib.auth",
    "axes",  # console sign-in throttling (harness/console/login.py)
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here: the docs work offline
    "policy.casbin_rules.CasbinRulesConfig",
    "harness.apps.HarnessConfig",
    "gateway.apps.GatewayConfig",
    "tools.apps.ToolsConfig",
    "tools.demo.apps.DemoConfig",
    "policy.apps.PolicyConfig",
    "traces.apps.TracesConfig",
    "experiments.apps.ExperimentsConfig",
]

MIDDLEWARE = [
    # A declared body over DATA_UPLOAD_MAX_MEMORY_SIZE is 413 before anything else runs (WSGI;
    # under ASGI harness/asgi.py refuses it before Django reads it).
    "harness.body_limit.refuse_oversized_bodies",
    "django.middleware.security.SecurityMiddleware",
    "harness.api.middleware.refuse_unservable_requests",
    "harness.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a sign-in refused by the lockout into harness.console.login's page.
    "axes.middleware.AxesMiddleware",
]

# --- Console sign-in throttling (django-axes; docs/security.md "Hardening") ---------------
# After HARNESS_LOGIN_FAILURE_LIMIT wrong passwords in a row for one user name from one
# address, that user cannot sign in from that address for HARNESS_LOGIN_COOLOFF_S seconds.
AUTHENTICATION_BACKENDS = [
    "harness.console.login.ConsoleLoginBackend",  # refuses locked-out sign-ins first
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("HARNESS_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(seconds=env_int("HARNESS_LOGIN_COOLOFF_S", 900, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Attempts while locked out are refused but do not extend the lockout: it ends when the page
# said it would, and a user who tries the right password meanwhile is not locked out longer.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # every failed sign-in, kept: the audit of lockouts
AXES_LOCKOUT_CALLABLE = "harness.console.login.lockout_response"
AXES_ENABLE_ADMIN = False  # harness/admin.py registers read-only pages of its own
AXES_VERBOSE = False  # no banner on every start-up and management command

# --- Console single sign-on (OpenID Connect; docs/identity.md) -----------------------------
# On when an issuer is set: the console signs in through the provider (authorization code
# flow with PKCE and a nonce), users are provisioned at their first sign-in and their roles
# re-synced from the ID token's groups at every one; passwords sign in superusers only (the
# break-glass account, made with `manage.py createsuperuser`).
HARNESS_OIDC_ISSUER = env_str("HARNESS_OIDC_ISSUER").rstrip("/")
HARNESS_OIDC_CLIENT_ID = env_str("HARNESS_OIDC_CLIENT_ID")
HARNESS_OIDC_CLIENT_SECRET = env_str("HARNESS_OIDC_CLIENT_SECRET")  # or _FILE
HARNESS_OIDC_SCOPES = env_str("HARNESS_OIDC_SCOPES", "openid email profile groups")
HARNESS_OIDC_GROUPS_CLAIM = env_str("HARNESS_OIDC_GROUPS_CLAIM", "groups")
HARNESS_OIDC_USERNAME_CLAIM = env_str("HARNESS_OIDC_USERNAME_CLAIM", "preferred_username")
HARNESS_OIDC_SIGN_ALGO = env_str("HARNESS_OIDC_SIGN_ALGO", "RS256")
HARNESS_OIDC_TIMEOUT_S = env_float("HARNESS_OIDC_TIMEOUT_S", 10.0, minimum=0.1)
HARNESS_OIDC_LEEWAY_S = env_int("HARNESS_OIDC_LEEWAY_S", 30, minimum=0)
# IdP group -> [tenant, console role] (or a list of such pairs).
HARNESS_OIDC_GROUP_MAP = env_group_map("HARNESS_OIDC_GROUP_MAP")
if HARNESS_OIDC_ISSUER:
    if not (HARNESS_OIDC_CLIENT_ID and HARNESS_OIDC_CLIENT_SECRET):
        raise ImproperlyConfigured(
            "HARNESS_OIDC_ISSUER is set: HARNESS_OIDC_CLIENT_ID and HARNESS_OIDC_CLIENT_SECRET "
            "(or HARNESS_OIDC_CLIENT_SECRET_FILE) are needed too"
        )
    AUTHENTICATION_BACKENDS = [
        "harness.console.login.ConsoleLoginBackend",
        "harness.console.oidc.ConsoleOidcBackend",
        "harness.console.oidc.BreakGlassPasswordBackend",  # passwords: superusers only
    ]

ROOT_URLCONF = "harness.urls"
WSGI_APPLICATION = "harness.wsgi.application"
# The ASGI server (harness/asgi_handler.py): threads kept per web process for the requests' sync
# work, as a threaded WSGI server's --threads; requests past it wait for one.
HARNESS_ASGI_THREADS = env_int("HARNESS_ASGI_THREADS", 32, minimum=1)

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "harness.sqlite3"}
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the worker share the file (also when DATABASE_URL names it): WAL lets
    # readers proceed during a write, IMMEDIATE takes the write lock up front instead of
    # failing on upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    if DATABASE_URL:
        DATABASES["default"]["CONN_MAX_AGE"] = env_int("HARNESS_DB_CONN_MAX_AGE", 60, minimum=0)
else:
    # Parameters travel apart from the statement text (no quoting of every value in Python),
    # and a statement a connection runs for the fifth time becomes a prepared one, parsed and
    # planned once: the run engine's step writes are the same few statements thousands of
    # times. Django leaves statements unprepared unless told (for transaction-mode poolers
    # older than PgBouncer 1.21): HARNESS_DB_PREPARE_THRESHOLD=off does the same.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True,
        prepare_threshold=env_int_or_off("HARNESS_DB_PREPARE_THRESHOLD", 5, minimum=0),
    )
    # A pool of connections per process (psycopg_pool, through Django): a connection closed at
    # the end of a request or a run goes back to the pool, open and with its statements still
    # prepared, and the next one takes it. Without it the ASGI server (each request a thread of
    # its own, so CONN_MAX_AGE must be 0) opened a connection, a server process, per sync run.
    # Sizes are per process (docs/configuration.md); a Celery prefork child's pool is its own
    # (Celery's Django fix-up closes the pool in each child and around each task).
    # A deployment that set HARNESS_DB_CONN_MAX_AGE above 0 (the setting predates the pool)
    # asked for persistent connections: it keeps them, and only an explicit
    # HARNESS_DB_POOL=on beside it is a contradiction.
    _persistent_age = env_int("HARNESS_DB_CONN_MAX_AGE", 0, minimum=0)
    if env_bool("HARNESS_DB_POOL", default=not _persistent_age):
        if _persistent_age:
            raise ImproperlyConfigured(
                "HARNESS_DB_CONN_MAX_AGE must be 0 with the connection pool on (the pool keeps "
                "the connections); HARNESS_DB_POOL=off keeps persistent connections instead"
            )
        _pool_max = env_int("HARNESS_DB_POOL_MAX_SIZE", 16, minimum=1)
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": min(env_int("HARNESS_DB_POOL_MIN_SIZE", 2, minimum=0), _pool_max),
            "max_size": _pool_max,
            "timeout": env_float("HARNESS_DB_POOL_TIMEOUT_S", 10.0, minimum=0.1),
        }
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        # A pooled connection may have died while idle (a PostgreSQL restart): checked (one
        # empty round trip) before it is handed out, a dead one is replaced.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    else:
        DATABASES["default"]["CONN_MAX_AGE"] = env_int("HARNESS_DB_CONN_MAX_AGE", 60, minimum=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, cache and Celery ----------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "harness",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def filesystem_broker_options(folder: Path) -> dict[str, object]:
    """kombu's filesystem transport: a real broker between real processes, with no server."""
    (folder / "processed").mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "processed_folder": str(folder / "processed"),
        "store_processed": False,
        "control_folder": str(folder / "control"),
    }


# The embedded broker names a host (the filesystem transport ignores it) because kombu warns
# "No hostname was supplied" about a URL without one, once per connection.
EMBEDDED_BROKER_URL = "filesystem://localhost/"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL or EMBEDDED_BROKER_URL
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(VAR_DIR / "celery-broker")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = env_int("HARNESS_TASK_SOFT_TIME_LIMIT_S", 900, minimum=1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "recover-stalled-runs": {
        "task": "harness.recover_stalled_runs",
        "schedule": env_float("HARNESS_SWEEP_INTERVAL_S", 15.0, minimum=0.5),
    },
    "dispatch-due-webhooks": {
        "task": "harness.dispatch_due_webhooks",
        "schedule": env_float("HARNESS_SWEEP_INTERVAL_S", 15.0, minimum=0.5),
    },
}

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "servestatic.storage.CompressedStaticFilesStorage"},
}

# --- API ------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["harness.api.authentication.TenantApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["harness.api.authentication.IsTenantClient"],
    "DEFAULT_PARSER_CLASSES": ["harness.api.untrusted.UntrustedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "harness.api.exceptions.render_api_error",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Harness API",
    "DESCRIPTION": "Run agents that act on business systems through authorised, audited tools.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "harness.api.schema.document_error_statuses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "PermissionEffectEnum": ["allow", "deny"],
        "RuleEffectEnum": ["refuse", "require_approval"],
    },
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True},
}

# --- Harness --------------------------------------------------------------------------------
HARNESS_MODEL = env_str("HARNESS_MODEL", "scripted:demo")
HARNESS_AGENT_DIRS = [BASE_DIR / "harness" / "agents", *env_paths("HARNESS_AGENT_DIRS")]
HARNESS_TOOL_DIRS = [BASE_DIR / "tools" / "definitions", *env_paths("HARNESS_TOOL_DIRS")]
HARNESS_SCRIPT_DIRS = [BASE_DIR / "gateway" / "scripts"]
HARNESS_DEFAULT_MAX_STEPS = env_int("HARNESS_DEFAULT_MAX_STEPS", 10, minimum=1)
HARNESS_TOOL_TIMEOUT_S = env_float("HARNESS_TOOL_TIMEOUT_S", 30.0, minimum=0.1)
# Sync runs answer inline up to this many seconds, then 202 and a worker finishes them.
HARNESS_SYNC_DEADLINE_S = env_float("HARNESS_SYNC_DEADLINE_S", 30.0, minimum=0.1)
# Runs with no deadline of their own (agent file or request) stop after this long.
HARNESS_DEFAULT_DEADLINE_S = env_float("HARNESS_DEFAULT_DEADLINE_S", 900.0, minimum=1)
HARNESS_RUN_LEASE_S = env_float("HARNESS_RUN_LEASE_S", 60.0, minimum=1)
HARNESS_SWEEP_INTERVAL_S = env_float("HARNESS_SWEEP_INTERVAL_S", 15.0, minimum=0.5)
HARNESS_CONTEXT_TOKENS = env_int("HARNESS_CONTEXT_TOKENS", 32000, minimum=500)
HARNESS_WEBHOOK_TIMEOUT_S = env_float("HARNESS_WEBHOOK_TIMEOUT_S", 10.0, minimum=0.1)
# Seconds between delivery attempts; the defaults span more than 24 hours.
HARNESS_WEBHOOK_RETRY_SCHEDULE_S = [
    float(x)
    for x in (
        env_list("HARNESS_WEBHOOK_RETRY_SCHEDULE_S")
        or ["30", "120", "600", "1800", "3600", "7200", "14400", "28800", "43200"]
    )
]
# Networks callback URLs may resolve to although private/loopback (CIDRs, comma-separated).
HARNESS_WEBHOOK_ALLOWED_NETWORKS = env_list("HARNESS_WEBHOOK_ALLOWED_NETWORKS")

# --- Model gateway: named routes (docs/models.md) ------------------------
HARNESS_ROUTES = env_json("HARNESS_ROUTES", {})
for _options in HARNESS_ROUTES.values() if isinstance(HARNESS_ROUTES, dict) else ():
    if isinstance(_options, dict) and isinstance(_options.get("api_key_env"), str):
        _options["api_key"] = env_str(_options["api_key_env"])
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
# Tool results longer than this (JSON characters) reach the model as a digest of key fields.
HARNESS_TOOL_RESULT_MAX_CHARS = env_int("HARNESS_TOOL_RESULT_MAX_CHARS", 8000, minimum=200)
# Concurrency-safe calls of one step in flight at once, and tool threads per process.
HARNESS_TOOL_PARALLELISM_PER_RUN = env_int("HARNESS_TOOL_PARALLELISM_PER_RUN", 4, minimum=1)
HARNESS_TOOL_MAX_THREADS = env_int("HARNESS_TOOL_MAX_THREADS", 16, minimum=1)
# Automatic retries of transient failures, for idempotent tools only.
HARNESS_TOOL_MAX_RETRIES = env_int("HARNESS_TOOL_MAX_RETRIES", 2, minimum=0)
# ${secret:NAME} in HTTP tool files reads HARNESS_SECRET_NAME (or HARNESS_SECRET_NAME_FILE).
HARNESS_SECRETS = env_prefixed("HARNESS_SECRET_")
# MCP servers as tool providers (docs/mcp.md): {"mcpServers": {name: {...}}}.
# Unset, it is the demo's configuration once ``manage.py load_demo`` wrote it under var/: the
# web server, the worker, ``check_tools`` and ``run_agent`` from a plain shell all see the same
# servers (docs/catalogue.md). Set (even empty), the variable wins.
DEMO_MCP_CONFIG = VAR_DIR / "demo-mcp-servers.json"
HARNESS_MCP_CONFIG = env_str(
    "HARNESS_MCP_CONFIG", str(DEMO_MCP_CONFIG) if DEMO_MCP_CONFIG.is_file() else ""
)
HARNESS_MCP_CONNECT_TIMEOUT_S = env_float("HARNESS_MCP_CONNECT_TIMEOUT_S", 15.0, minimum=0.1)
# How long a server's tool list is trusted before a call lists it again (drift check).
HARNESS_MCP_LIST_TTL_S = env_float("HARNESS_MCP_LIST_TTL_S", 30.0, minimum=0)

CASBIN_MODEL = str(BASE_DIR / "policy" / "rbac_with_domains.conf")

# --- Traces: masking, audit chain, retention, OpenTelemetry ---------------------------------
# Keys default to ones derived from SECRET_KEY; set them explicitly in production, because
# rotating SECRET_KEY would otherwise orphan every stored fingerprint and checkpoint signature.
# Each variable takes several keys, newest first (comma-separated): the first writes, all read.
# The ``*_KEYS`` lists hold the key material; the key in use is derived from it with HKDF.
HARNESS_FINGERPRINT_KEYS = env_keys(
    "HARNESS_FINGERPRINT_KEY", derive_key(SECRET_KEY, "harness.fingerprint")
)
HARNESS_FINGERPRINT_KEY = hkdf(HARNESS_FINGERPRINT_KEYS[0], "harness.fingerprint.v2").hex()
HARNESS_AUDIT_CHECKPOINT_KEYS = env_keys(
    "HARNESS_AUDIT_CHECKPOINT_KEY", derive_key(SECRET_KEY, "harness.audit-checkpoint")
)
HARNESS_AUDIT_CHECKPOINT_KEY = hkdf(
    HARNESS_AUDIT_CHECKPOINT_KEYS[0], "harness.audit-checkpoint.v2"
).hex()
# Run receipts (docs/evidence.md): PEM blocks, newest first; the first (an Ed25519 private key)
# signs, later ones (earlier keys, best as public keys) stay published so their receipts verify.
# Unset: a key generated once under var/ (development and the demo only).
HARNESS_RECEIPT_SIGNING_KEY = env_str("HARNESS_RECEIPT_SIGNING_KEY")
# Masking (docs/audit-and-masking.md): regions a phone number written nationally is looked
# up in, and extra detectors (dotted paths to a detector, its class or a factory).
_DEFAULT_PHONE_REGIONS = "CN,US,CA,GB,DE,FR,ES,IT,JP,IN"
HARNESS_PHONE_REGIONS = tuple(
    r.upper() for r in env_list("HARNESS_PHONE_REGIONS") or _DEFAULT_PHONE_REGIONS.split(",")
)
HARNESS_MASKING_DETECTORS = tuple(env_list("HARNESS_MASKING_DETECTORS"))
HARNESS_TRACE_RETENTION_DAYS = env_int("HARNESS_TRACE_RETENTION_DAYS", 365, minimum=1)
HARNESS_TRACE_RETENTION_BATCH = env_int("HARNESS_TRACE_RETENTION_BATCH", 500, minimum=1)
# OTLP/HTTP: the per-signal endpoint is used as is, the base endpoint gets /v1/traces.
_OTEL_BASE = env_str("OTEL_EXPORTER_OTLP_ENDPOINT").rstrip("/")
HARNESS_OTEL_TRACES_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
    f"{_OTEL_BASE}/v1/traces" if _OTEL_BASE else ""
)
HARNESS_OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "harness")
HARNESS_OTEL_CAPTURE_CONTENT = env_bool("HARNESS_OTEL_CAPTURE_CONTENT", default=True)
CELERY_BEAT_SCHEDULE["traces.delete_expired_traces"] = {
    "task": "traces.delete_expired_traces",
    "schedule": env_float("HARNESS_TRACE_RETENTION_INTERVAL_S", 3600.0, minimum=1.0),
}
# Encrypts the clear working copy of runs (the readable copies are masked).
# Newest first; ``manage.py reseal`` re-encrypts everything with the first one.
HARNESS_SEALING_KEYS = env_keys("HARNESS_SEALING_KEY", derive_key(SECRET_KEY, "harness.sealing"))
# --- Policy: tenant limits, budgets, approvals (see docs/policy-reference.md) --------------
# Deployment defaults; a tenant's TenantLimits row (admin) overrides each. 0 = unlimited.
HARNESS_TENANT_RUNS_PER_SECOND = env_int("HARNESS_TENANT_RUNS_PER_SECOND", 10, minimum=1)
HARNESS_TENANT_MAX_CONCURRENT_RUNS = env_int("HARNESS_TENANT_MAX_CONCURRENT_RUNS", 50, minimum=1)
HARNESS_TENANT_MODEL_CALLS_PER_MINUTE = env_int(
    "HARNESS_TENANT_MODEL_CALLS_PER_MINUTE", 600, minimum=1
)
HARNESS_TENANT_MAX_TOKENS_PER_RUN = env_int("HARNESS_TENANT_MAX_TOKENS_PER_RUN", 0, minimum=0)
HARNESS_TENANT_MAX_TOOL_CALLS_PER_RUN = env_int(
    "HARNESS_TENANT_MAX_TOOL_CALLS_PER_RUN", 0, minimum=0
)
HARNESS_TENANT_DAILY_TOKENS = env_int("HARNESS_TENANT_DAILY_TOKENS", 0, minimum=0)
HARNESS_TENANT_DAILY_COST_USD = env_float("HARNESS_TENANT_DAILY_COST_USD", 0.0, minimum=0)
HARNESS_TENANT_DAILY_TOOL_CALLS = env_int("HARNESS_TENANT_DAILY_TOOL_CALLS", 0, minimum=0)
# What a model call reserves for its answer on top of the prompt estimate.
HARNESS_COMPLETION_RESERVE_TOKENS = env_int("HARNESS_COMPLETION_RESERVE_TOKENS", 1024, minimum=1)
# What a run without a limit of its own reserves from its tenant's daily budget at admission
# until its agent has finished runs in the tenant (then: their p95 spend plus one answer's
# reserve). 0: such runs reserve per model call instead (see docs/policy-reference.md, "Budgets").
HARNESS_DEFAULT_RUN_RESERVE_TOKENS = env_int("HARNESS_DEFAULT_RUN_RESERVE_TOKENS", 4096, minimum=0)
# Budget alerts: percentages of the day's and of each run's budgets (tenants may set their own).
HARNESS_BUDGET_ALERT_THRESHOLDS = tuple(
    env_int_list("HARNESS_BUDGET_ALERT_THRESHOLDS", [50, 80, 100], minimum=1)
)
HARNESS_APPROVAL_TTL_S = env_int("HARNESS_APPROVAL_TTL_S", 86_400, minimum=1)
# Live event streams (GET /runs/{id}/events) a tenant may hold open at once, all processes.
HARNESS_EVENT_STREAMS_PER_TENANT = env_int("HARNESS_EVENT_STREAMS_PER_TENANT", 50, minimum=1)
# --- Audit streamed to SIEMs (docs/siem.md) -------------------------------------------------
# Sinks: a JSON list of {"name", "type": "https"|"splunk_hec"|"syslog", …}; a sink's token is
# read from the variable its "token_env" names (or that variable's _FILE).
HARNESS_SIEM_SINKS = env_json("HARNESS_SIEM_SINKS", [])
HARNESS_SIEM_SECRETS = {
    str(sink["token_env"]): env_str(str(sink["token_env"]))
    for sink in (HARNESS_SIEM_SINKS if isinstance(HARNESS_SIEM_SINKS, list) else [])
    if isinstance(sink, dict) and sink.get("token_env")
}
HARNESS_SIEM_INTERVAL_S = env_float("HARNESS_SIEM_INTERVAL_S", 5.0, minimum=0.5)
# A gap in a table's ids younger than this is waited for (a transaction still open).
HARNESS_SIEM_SETTLE_S = env_float("HARNESS_SIEM_SETTLE_S", 30.0, minimum=0)
HARNESS_SIEM_RETRY_BASE_S = env_float("HARNESS_SIEM_RETRY_BASE_S", 2.0, minimum=0.1)
HARNESS_SIEM_RETRY_MAX_S = env_float("HARNESS_SIEM_RETRY_MAX_S", 300.0, minimum=0.1)
CELERY_BEAT_SCHEDULE["deliver-siem"] = {
    "task": "harness.deliver_siem",
    "schedule": HARNESS_SIEM_INTERVAL_S,
}

CELERY_BEAT_SCHEDULE["expire-approvals"] = {
    "task": "policy.expire_approvals",
    "schedule": env_float("HARNESS_SWEEP_INTERVAL_S", 15.0, minimum=0.5),
}

# Every log record is cleaned of secrets and personal data when it is made (harness.logs).
LOGGING_CONFIG = "harness.logs.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("HARNESS_LOG_LEVEL", "INFO")},
    # pycasbin logs the whole model and policy at INFO on every load.
    # httpx, httpcore and httpx2 (the model SDKs' transport) log every request's full URL
    # (a tool's URL may hold a secret, a callback URL a token): only their warnings.
    "loggers": {
        "casbin": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
