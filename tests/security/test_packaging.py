"""Finding 11: production packaging. Every variable of .env reaches the containers, .env is
in neither git nor the image, the image carries no development tools, and ``check --deploy``
is clean under the compose settings."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HARNESS_SERVICES = ("migrate", "web", "worker", "beat")
# What an operator puts in .env and expects in every container.
DOTENV = {
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "POSTGRES_PASSWORD": "pw-" + secrets.token_hex(8),
    "HARNESS_SEALING_KEY": secrets.token_urlsafe(32),
    "HARNESS_FINGERPRINT_KEY": secrets.token_urlsafe(32),
    "HARNESS_AUDIT_CHECKPOINT_KEY": secrets.token_urlsafe(32),
    "HARNESS_ROUTES": '{"scripted:demo": {"price": {"input": 1, "output": 2}}}',
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
    "OTEL_SERVICE_NAME": "harness-prod",
    "OPENAI_API_KEY": "sk-test-" + secrets.token_hex(8),
    "HARNESS_MODEL": "openai:gpt-4o-mini",
}
VARIABLE = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?:(?P<op>:-|:\?)(?P<arg>[^}]*))?\}")


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error} against the .env file."""

    def replace(match: re.Match[str]) -> str:
        current = env.get(match["name"], "")
        if match["op"] == ":-":
            return current or match["arg"]
        if match["op"] == ":?" and not current:
            raise AssertionError(match["arg"])
        return current

    return VARIABLE.sub(replace, value)


def container_environment(service: str, dotenv: dict[str, str]) -> dict[str, str]:
    """What a container of ``service`` gets: env_file, then ``environment`` over it."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    spec = compose["services"][service]
    files = [f if isinstance(f, str) else f["path"] for f in spec.get("env_file", [])]
    env = dict(dotenv) if ".env" in files else {}
    for name, value in (spec.get("environment") or {}).items():
        env[name] = _interpolate(str(value), dotenv)
    return env


@pytest.mark.parametrize("service", HARNESS_SERVICES)
def test_every_variable_of_the_env_file_reaches_the_container(service):
    env = container_environment(service, DOTENV)
    for name, value in DOTENV.items():
        assert env.get(name) == value, f"{name} does not reach {service}"


def test_env_is_ignored_by_git_and_docker():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".env"], cwd=ROOT, check=False
    ).returncode
    assert ignored == 0, ".env is not in .gitignore"
    patterns = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in patterns


def test_the_image_installs_the_runtime_requirements_only():
    runtime = (ROOT / "requirements.txt").read_text().lower()
    for tool in ("playwright", "ruff", "pytest", "schemathesis"):
        assert not re.search(rf"^{tool}\b", runtime, re.MULTILINE), tool
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in dev
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "requirements.txt" in dockerfile
    assert "requirements-dev" not in dockerfile


def test_the_image_and_compose_serve_the_api_over_asgi():
    # Finding 2: under a threaded WSGI server each live event stream holds a thread; the
    # image's own command (``docker run``) must not bring that back.
    dockerfile = (ROOT / "Dockerfile").read_text()
    [image_command] = re.findall(r"^CMD (.+)$", dockerfile, re.MULTILINE)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for command in (image_command, " ".join(compose["services"]["web"]["command"])):
        assert "harness.asgi:application" in command, command
        assert "-k uvicorn_worker.UvicornWorker" in command, command
        assert "wsgi" not in command, command


def test_check_deploy_is_clean_under_the_compose_settings(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HARNESS_", "DJANGO_", "DATABASE_", "REDIS_", "OTEL_"))
    }
    env.update(container_environment("web", DOTENV))
    env["DJANGO_SETTINGS_MODULE"] = "harness.settings.base"
    env["HARNESS_VAR_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_https_settings_come_from_the_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(
        DJANGO_SETTINGS_MODULE="harness.settings.base",
        HARNESS_VAR_DIR=str(tmp_path),
        DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto:https",
        DJANGO_SECURE_HSTS_SECONDS="600",
        DJANGO_SESSION_COOKIE_SECURE="true",
    )
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert out.split() == ["('HTTP_X_FORWARDED_PROTO',", "'https')", "600", "True", "False"]
