"""A real OpenID Provider for the console's single sign-on tests: panva's certified Node
``oidc-provider`` (tests/support/oidc_provider/, pinned by its package-lock.json; ``npm ci``
installs it when its node_modules is missing), one process per provider, and a scripted
sign-in through its development pages (any login name signs in as that account).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests

PROVIDER_DIR = Path(__file__).parent / "oidc_provider"
CLIENT_ID = "harness-console"
CLIENT_SECRET = "test-client-secret-0123456789abcdef"
# Another application registered at the same provider (tests/support/oidc_provider/server.mjs).
OTHER_CLIENT_ID, OTHER_CLIENT_SECRET = f"{CLIENT_ID}-other-app", f"{CLIENT_SECRET}-other"


@dataclass
class Provider:
    issuer: str
    accounts_path: Path
    log_path: Path

    def set_groups(self, account: str, groups: list[str], email: str = "") -> None:
        """The groups ``account`` has from its next sign-in on."""
        accounts = json.loads(self.accounts_path.read_text())
        accounts[account] = {"email": email or f"{account}@example.com", "groups": groups}
        self.accounts_path.write_text(json.dumps(accounts))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def install_provider() -> None:
    """``npm ci`` once (CI runs it in .ci/run too); a clear failure without Node."""
    if (PROVIDER_DIR / "node_modules" / "oidc-provider").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("Node.js and npm are needed for the SSO tests (apt install nodejs npm)")
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True, timeout=300
    )


@contextmanager
def run_provider(
    tmp_path: Path, redirect_uris: list[str], *, clock_offset_s: int = 0
) -> Iterator[Provider]:
    """A provider on a free port of 127.0.0.1 with one client (``CLIENT_ID``), stopped after."""
    install_provider()
    accounts = tmp_path / f"accounts-{time.monotonic_ns()}.json"
    accounts.write_text("{}")
    log_path = tmp_path / f"oidc-provider-{time.monotonic_ns()}.log"
    env = os.environ | {
        "OIDC_PORT": "0",
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_REDIRECT_URIS": ",".join(redirect_uris),
        "OIDC_POST_LOGOUT_REDIRECT_URIS": ",".join(
            urljoin(uri, "/admin/login/") for uri in redirect_uris
        ),
        "OIDC_ACCOUNTS": str(accounts),
        "OIDC_CLOCK_OFFSET_S": str(clock_offset_s),
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            ["node", "server.mjs"], cwd=PROVIDER_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        issuer = _wait_for_issuer(log_path, process)
        yield Provider(issuer=issuer, accounts_path=accounts, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_issuer(log_path: Path, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"listening (http://\S+)", log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the OpenID provider did not start:\n{log_path.read_text()}")


def sign_in_at_provider(authorize_url: str, login: str) -> str:
    """Sign in as ``login`` on the provider's pages (a plain HTTP client, no browser) and
    consent; returns the URL the provider sends the browser back to (the callback)."""
    with requests.Session() as browser:
        response = browser.get(authorize_url, allow_redirects=True, timeout=10)
        for _ in range(4):
            form = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
            if not (form and prompt):
                raise AssertionError(f"no sign-in form at {response.url}:\n{response.text[:500]}")
            data = {"prompt": prompt.group(1)}
            if prompt.group(1) == "login":
                data |= {"login": login, "password": "any"}
            response = browser.post(
                urljoin(response.url, form.group(1)), data=data, allow_redirects=False, timeout=10
            )
            while response.is_redirect:
                location = urljoin(response.url, response.headers["Location"])
                if "/oidc/callback/" in location:
                    return location
                response = browser.get(location, allow_redirects=False, timeout=10)
        raise AssertionError("the provider never sent the browser back")


GROUP_MAP = {
    "harness-acme-operators": [("acme", "operator")],
    "harness-globex-auditors": [("globex", "auditor")],
}
SSO_BACKENDS = [
    "harness.console.login.ConsoleLoginBackend",
    "harness.console.oidc.ConsoleOidcBackend",
    "harness.console.oidc.BreakGlassPasswordBackend",
]


def turn_sso_on(settings, issuer: str) -> None:
    """The settings ``HARNESS_OIDC_ISSUER=<issuer>`` (and the client) give a deployment."""
    settings.HARNESS_OIDC_ISSUER = issuer
    settings.HARNESS_OIDC_CLIENT_ID = CLIENT_ID
    settings.HARNESS_OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.HARNESS_OIDC_GROUP_MAP = GROUP_MAP
    settings.AUTHENTICATION_BACKENDS = SSO_BACKENDS


@pytest.fixture(scope="module")
def oidc_provider(tmp_path_factory) -> Iterator[Provider]:
    """A provider whose client calls back the Django test client (``http://testserver``)."""
    with run_provider(
        tmp_path_factory.mktemp("oidc"), ["http://testserver/oidc/callback/"]
    ) as provider:
        yield provider


@pytest.fixture
def sso(settings, oidc_provider: Provider, demo) -> Provider:
    """Single sign-on on, against ``oidc_provider``, with the demo tenants and the console
    roles' Django groups (``operator`` may view runs and decide approvals, ``auditor`` views)."""
    from django.contrib.auth.models import Group, Permission

    turn_sso_on(settings, oidc_provider.issuer)
    operator, _ = Group.objects.get_or_create(name="operator")
    operator.permissions.set(
        Permission.objects.filter(codename__in=["view_run", "change_toolapproval"])
    )
    auditor, _ = Group.objects.get_or_create(name="auditor")
    auditor.permissions.set(Permission.objects.filter(codename="view_run"))
    return oidc_provider


def start_sign_in(client, next_url: str = "/admin/") -> str:
    """The provider URL the console's *Sign in with single sign-on* leads to."""
    response = client.get(f"/oidc/authenticate/?next={next_url}")
    assert response.status_code == 302, response.content[:300]
    return response["Location"]


def sign_in(client, login: str):
    """A whole sign-in through the provider; the console's answer to the callback."""
    return client.get(sign_in_at_provider(start_sign_in(client), login))


def id_token_for_other_app(provider: Provider, login: str, nonce: str) -> str:
    """An ID token the provider issues to the *other* application for ``login`` (a real
    code flow with PKCE, run here as that application would)."""
    import base64
    import hashlib
    import secrets
    from urllib.parse import parse_qs, urlencode, urlparse

    metadata = requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=10)
    endpoints = metadata.json()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    redirect_uri = "http://testserver/oidc/callback/"
    query = {
        "response_type": "code",
        "client_id": OTHER_CLIENT_ID,
        "redirect_uri": redirect_uri,
        "scope": "openid email profile groups",
        "state": secrets.token_urlsafe(16),
        "nonce": nonce,
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
    }
    callback = sign_in_at_provider(
        f"{endpoints['authorization_endpoint']}?{urlencode(query)}", login
    )
    code = parse_qs(urlparse(callback).query)["code"][0]
    tokens = requests.post(
        endpoints["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            "client_id": OTHER_CLIENT_ID,
            "client_secret": OTHER_CLIENT_SECRET,
        },
        timeout=10,
    )
    tokens.raise_for_status()
    return tokens.json()["id_token"]
