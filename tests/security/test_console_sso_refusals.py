"""Console single sign-on refuses what must not sign anyone in, against a real OpenID Provider
(tests/support/oidc.py): a callback used twice (state replay), a code from another sign-in
(PKCE and nonce), an ID token changed anywhere, unsigned or signed with the client secret, an
ID token of another sign-in (nonce replay), an expired one, and the provider's own refusal.
Each is a 403 page saying why, and nobody is signed in."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlparse

import jwt
import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from harness.console.oidc import ConsoleOidcBackend, SignInRefused
from harness.models import SecurityEvent
from tests.support.oidc import (
    CLIENT_SECRET,
    id_token_for_other_app,
    run_provider,
    sign_in,
    sign_in_at_provider,
    start_sign_in,
    turn_sso_on,
)

BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def real_id_token(sso, client) -> tuple[str, dict]:
    """An ID token the provider issued for a sign-in, and its claims."""
    sso.set_groups("carol", ["harness-acme-operators"])
    assert sign_in(client, "carol").status_code == 302
    token = client.session["oidc_id_token"]
    return token, jwt.decode(token, options={"verify_signature": False})


def test_a_callback_used_a_second_time_is_refused(sso, client):
    sso.set_groups("carol", ["harness-acme-operators"])
    callback = sign_in_at_provider(start_sign_in(client), "carol")
    assert client.get(callback).status_code == 302
    again_while_signed_in = client.get(callback)
    client.post("/admin/logout/")

    replayed = client.get(callback)

    assert replayed.status_code == 403
    assert "already used" in replayed.content.decode()
    assert again_while_signed_in.status_code == 403
    assert "already used" in again_while_signed_in.content.decode()
    assert not signed_in(client)


def test_a_callback_taken_to_another_browser_is_refused(sso, client, django_user_model):
    sso.set_groups("carol", ["harness-acme-operators"])
    callback = sign_in_at_provider(start_sign_in(client), "carol")
    from django.test import Client

    attacker = Client()
    response = attacker.get(callback)

    assert response.status_code == 403
    assert not signed_in(attacker)
    assert not django_user_model.objects.filter(username="carol").exists()
    # Kept for the SIEM: a refused console sign-in, with why.
    refused = SecurityEvent.objects.filter(activity="login_failed").latest("id")
    assert (refused.outcome, refused.detail["method"]) == ("failure", "sso")
    assert "already used" in refused.detail["reason"]


def test_a_code_from_another_sign_in_is_refused(sso, client):
    sso.set_groups("carol", ["harness-acme-operators"])
    first = start_sign_in(client)
    second = start_sign_in(client)
    callback = urlparse(sign_in_at_provider(first, "carol"))
    code = parse_qs(callback.query)["code"][0]
    other_state = parse_qs(urlparse(second).query)["state"][0]

    # The code of the first sign-in, brought back as the second one's answer: its PKCE
    # verifier (and nonce) are the second's.
    response = client.get(f"/oidc/callback/?code={code}&state={other_state}")

    assert response.status_code == 403
    assert "refused the code: invalid_grant" in response.content.decode()
    assert not signed_in(client)


def test_the_providers_own_refusal_is_shown(sso, client):
    state = parse_qs(urlparse(start_sign_in(client)).query)["state"][0]

    response = client.get(
        f"/oidc/callback/?error=access_denied&error_description=End-User+aborted&state={state}"
    )

    assert response.status_code == 403
    assert "the identity provider answered: End-User aborted" in response.content.decode()
    assert state not in client.session.get("oidc_states", {})


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_an_id_token_changed_anywhere_is_refused(real_id_token, data):
    token, claims = real_id_token
    # Any character of the header, the claims or the signature but a segment's last (whose
    # low bits base64 may ignore) and the dots.
    positions = [
        i
        for i, char in enumerate(token)
        if char != "." and i + 1 < len(token) and token[i + 1] != "."
    ]
    position = data.draw(st.sampled_from(positions[:-1]))
    replacement = data.draw(st.sampled_from(BASE64URL))
    assume(replacement != token[position])
    changed = token[:position] + replacement + token[position + 1 :]

    with pytest.raises(SignInRefused):
        ConsoleOidcBackend().verify_token(changed, nonce=claims["nonce"])


def test_an_id_token_given_more_groups_is_refused(real_id_token):
    token, claims = real_id_token
    header, _, signature = token.split(".")
    more = {**claims, "groups": [*claims["groups"], "harness-globex-auditors"]}
    payload = base64.urlsafe_b64encode(json.dumps(more).encode()).rstrip(b"=").decode()

    with pytest.raises(SignInRefused, match="Signature verification failed"):
        ConsoleOidcBackend().verify_token(f"{header}.{payload}.{signature}", nonce=claims["nonce"])


def test_an_unsigned_id_token_is_refused(real_id_token):
    _, claims = real_id_token
    unsigned = jwt.encode(claims, key=None, algorithm="none")

    with pytest.raises(SignInRefused):
        ConsoleOidcBackend().verify_token(unsigned, nonce=claims["nonce"])


def test_an_id_token_signed_with_the_client_secret_is_refused(real_id_token):
    _, claims = real_id_token
    forged = jwt.encode(claims, CLIENT_SECRET, algorithm="HS256", headers={"kid": "test-key-1"})

    with pytest.raises(SignInRefused):
        ConsoleOidcBackend().verify_token(forged, nonce=claims["nonce"])


def test_an_id_token_of_another_sign_in_is_refused(real_id_token):
    token, _ = real_id_token

    # The real token, replayed into a sign-in that sent another nonce.
    with pytest.raises(SignInRefused, match="Nonce"):
        ConsoleOidcBackend().verify_token(token, nonce="the-nonce-of-another-sign-in")


def test_an_id_token_the_provider_issued_to_another_application_is_refused(sso):
    sso.set_groups("carol", ["harness-acme-operators"])
    # Signed by the provider's own key, for the right issuer and nonce: only not for us.
    token = id_token_for_other_app(sso, "carol", nonce="n-0123456789")

    with pytest.raises(SignInRefused, match=r"Audience doesn.t match"):
        ConsoleOidcBackend().verify_token(token, nonce="n-0123456789")


def test_the_same_id_token_passes_where_it_belongs(real_id_token):
    token, claims = real_id_token

    assert ConsoleOidcBackend().verify_token(token, nonce=claims["nonce"])["sub"] == "carol"


def test_an_expired_id_token_is_refused(settings, demo, client, tmp_path):
    # A provider whose clock is 20 minutes behind issues ID tokens (10 minutes long) that
    # expired 10 minutes ago.
    with run_provider(
        tmp_path, ["http://testserver/oidc/callback/"], clock_offset_s=-1200
    ) as provider:
        turn_sso_on(settings, provider.issuer)
        provider.set_groups("carol", ["harness-acme-operators"])

        response = sign_in(client, "carol")

    assert response.status_code == 403
    assert "Signature has expired" in response.content.decode()
    assert not signed_in(client)
    assert not get_user_model().objects.filter(username="carol").exists()
