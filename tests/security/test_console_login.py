"""Finding L8 (issue 21): the console's sign-in had no throttling. 40 wrong passwords in
12.5 s were all answered 200, then the right one signed in. Now a user name is locked at an
address after ``HARNESS_LOGIN_FAILURE_LIMIT`` failures in a row, for ``HARNESS_LOGIN_COOLOFF_S``,
the right password included; the lockout is audited. Through Django's test client against
the real sign-in view."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.support.servers import serve

LOGIN = "/admin/login/"
PASSWORD = "the-right-password-42"


@pytest.fixture
def users(db):
    User = get_user_model()
    User.objects.create_superuser("root", "root@example.com", PASSWORD)
    User.objects.create_user("staffer", password=PASSWORD, is_staff=True)


def sign_in(address: str, username: str, password: str):
    client = Client(REMOTE_ADDR=address)
    response = client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})
    return response, "_auth_user_id" in client.session


def test_wrong_passwords_lock_the_user_out_and_the_right_one_is_refused_until_the_cooldown(
    users, settings
):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=60)
    limit = settings.AXES_FAILURE_LIMIT
    statuses = [sign_in("10.0.0.1", "root", f"wrong-{n}")[0].status_code for n in range(40)]
    # The form's "wrong password" page until the limit, then the lockout page.
    assert statuses == [200] * (limit - 1) + [429] * (40 - limit + 1)

    response, signed_in = sign_in("10.0.0.1", "root", PASSWORD)
    assert response.status_code == 429
    assert not signed_in
    page = response.content.decode()
    assert "Too many failed sign-ins for “root” from your address" in page
    assert "even with the right password" in page
    assert 30 <= int(response["Retry-After"]) <= 60

    # The cooldown ends (shortened to a second: axes measures it from the lockout when it
    # checks, so a second after the lockout it has passed).
    settings.AXES_COOLOFF_TIME = timedelta(seconds=1)
    time.sleep(1.1)
    response, signed_in = sign_in("10.0.0.1", "root", PASSWORD)
    assert response.status_code == 302
    assert signed_in
    # A success clears the count: one wrong password later is an ordinary failure again.
    assert sign_in("10.0.0.1", "root", "wrong")[0].status_code == 200


def test_attempts_during_the_lockout_do_not_extend_it(users, settings):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=4)
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in("10.0.0.1", "root", f"wrong-{n}")
    started = time.monotonic()  # after the lockout
    while time.monotonic() - started < 2:  # keep trying through the lockout
        assert sign_in("10.0.0.1", "root", "wrong")[0].status_code == 429
    time.sleep(max(0.0, 4.3 - (time.monotonic() - started)))
    response, signed_in = sign_in("10.0.0.1", "root", PASSWORD)
    assert response.status_code == 302
    assert signed_in


def test_other_users_and_other_addresses_are_not_affected(users, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in("10.0.0.1", "root", f"wrong-{n}")
    assert sign_in("10.0.0.1", "root", PASSWORD)[0].status_code == 429

    response, signed_in = sign_in("10.0.0.2", "root", PASSWORD)  # the same user elsewhere
    assert (response.status_code, signed_in) == (302, True)
    response, signed_in = sign_in("10.0.0.1", "staffer", PASSWORD)  # another user here
    assert (response.status_code, signed_in) == (302, True)


def test_a_lockout_is_audited_in_the_console_and_the_log(users, settings, caplog):
    caplog.set_level(logging.WARNING, logger="harness.console.login")
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in("10.0.0.9", "root", f"wrong-{n}")
    sign_in("10.0.0.9", "root", PASSWORD)  # refused while locked

    failures = AccessFailureLog.objects.filter(username="root", ip_address="10.0.0.9")
    assert failures.count() == settings.AXES_FAILURE_LIMIT
    assert failures.filter(locked_out=True).count() == 1
    attempt = AccessAttempt.objects.get(username="root", ip_address="10.0.0.9")
    assert attempt.failures_since_start == settings.AXES_FAILURE_LIMIT
    assert "wrong-" not in attempt.post_data  # passwords are not kept

    lines = [r.getMessage() for r in caplog.records if r.name == "harness.console.login"]
    assert any(
        line.startswith("Console sign-in locked out: 'root' at 10.0.0.9 after ")
        and f"after {settings.AXES_FAILURE_LIMIT} failed sign-ins" in line
        for line in lines
    ), lines
    assert any(line.startswith("Console sign-in refused: 'root' is locked out") for line in lines)

    # Superusers read the record in the console; deleting the count lifts the lockout.
    root = Client(REMOTE_ADDR="10.0.0.2")
    root.force_login(get_user_model().objects.get(username="root"))
    page = root.get("/admin/axes/accessfailurelog/")
    assert page.status_code == 200
    assert "10.0.0.9" in page.content.decode()
    staffer = Client()
    staffer.force_login(get_user_model().objects.get(username="staffer"))
    assert staffer.get("/admin/axes/accessfailurelog/").status_code == 403
    root.post(
        f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"}
    )  # lift the lockout
    assert sign_in("10.0.0.9", "root", PASSWORD)[0].status_code == 302


def test_the_limit_and_cooldown_come_from_the_environment():
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.base",
        "HARNESS_LOGIN_FAILURE_LIMIT": "7",
        "HARNESS_LOGIN_COOLOFF_S": "120",
    }
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.AXES_FAILURE_LIMIT, int(s.AXES_COOLOFF_TIME.total_seconds()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=django_settings.BASE_DIR, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == ["7", "120"]

    bad = subprocess.run(
        [sys.executable, "-c", code],
        cwd=django_settings.BASE_DIR,
        env=env | {"HARNESS_LOGIN_FAILURE_LIMIT": "0"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0
    assert "HARNESS_LOGIN_FAILURE_LIMIT=0 must be at least 1" in bad.stderr


@pytest.fixture(scope="module")
def start_server(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from serve(django_db_blocker, tmp_path_factory)


def test_the_shipped_server_locks_out_by_the_forwarded_address_of_a_trusted_proxy(
    start_server, transactional_db, settings
):
    # gunicorn with uvicorn workers takes the client's address from X-Forwarded-For when the
    # connection comes from FORWARDED_ALLOW_IPS (default: loopback, where this test is).
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    server = start_server("asgi")
    url = f"http://127.0.0.1:{server.port}{LOGIN}"

    def sign_in_via_proxy(client_address: str, password: str) -> httpx.Response:
        with httpx.Client(headers={"X-Forwarded-For": client_address}, timeout=30) as browser:
            form = browser.get(url).text
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
            return browser.post(
                url,
                data={"username": "root", "password": password, "csrfmiddlewaretoken": token},
                headers={"Referer": url},
            )

    statuses = [
        sign_in_via_proxy("203.0.113.5", f"wrong-{n}").status_code
        for n in range(settings.AXES_FAILURE_LIMIT + 1)
    ]
    assert statuses == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429, 429]
    refused = sign_in_via_proxy("203.0.113.5", PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.text
    assert sign_in_via_proxy("203.0.113.6", PASSWORD).status_code == 302
    assert AccessAttempt.objects.get(username="root").ip_address == "203.0.113.5"
