"""Single sign-on for the console: OpenID Connect through mozilla-django-oidc
(docs/identity.md).

The library runs the authorization code flow (state, nonce, PKCE S256); this module adds what
it leaves to the site:

- the provider's endpoints come from its discovery document
  (``<HARNESS_OIDC_ISSUER>/.well-known/openid-configuration``), fetched at the first sign-in
  and kept for an hour, never at start-up (a provider that is down does not stop the console);
- the ID token is checked in full: signature (the provider's JWKS), issuer, audience,
  expiry and issue time (``HARNESS_OIDC_LEEWAY_S``), nonce; its claims, not the userinfo
  endpoint's, are what the sign-in uses;
- the user is found by (issuer, subject) — never by e-mail, so an identity can never sign in
  as a local account that happens to share an address — created at the first sign-in, and
  given the roles its groups map to at every sign-in (``harness.console.roles``);
- every refusal is a ``403`` page saying why, and a warning line;
- signing out of the console also ends the session at the provider when it offers an
  ``end_session_endpoint``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from harness.console.roles import roles_of_groups, sync_console_roles
from harness.models import OidcIdentity
from harness.siem.events import on_sso_refused

logger = logging.getLogger(__name__)

DISCOVERY_TTL_S = 3600.0
# A user name must also be a valid user id in the policy (no ``:``, which marks roles).
USERNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,150}$")


def sso_enabled() -> bool:
    return bool(settings.HARNESS_OIDC_ISSUER)


class SignInRefused(SuspiciousOperation):
    """A single sign-on that must not sign anyone in; the message says why."""


# --- discovery --------------------------------------------------------------------------------

_discovery_lock = threading.Lock()
_discovered: dict[str, tuple[float, dict[str, Any]]] = {}


def provider_metadata() -> dict[str, Any]:
    """The issuer's discovery document, fetched once an hour per process."""
    issuer = settings.HARNESS_OIDC_ISSUER
    with _discovery_lock:
        cached = _discovered.get(issuer)
        if cached and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
            return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.HARNESS_OIDC_TIMEOUT_S)
        response.raise_for_status()
        metadata = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise SignInRefused(f"the identity provider's discovery document failed: {exc}") from exc
    if metadata.get("issuer", "").rstrip("/") != issuer:
        # OpenID Connect Discovery 1.0 §4.3: the document must name the issuer it was asked for.
        raise SignInRefused(
            f"the discovery document names the issuer {metadata.get('issuer')!r}, not {issuer!r}"
        )
    with _discovery_lock:
        _discovered[issuer] = (time.monotonic(), metadata)
    return metadata


def forget_provider_metadata() -> None:
    with _discovery_lock:
        _discovered.clear()


_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def oidc_setting(attr: str, *default: Any) -> Any:
    """The library's ``OIDC_*`` settings, from ``HARNESS_OIDC_*`` and the discovery document."""
    if attr in _ENDPOINTS:
        return provider_metadata()[_ENDPOINTS[attr]]
    values = {
        "OIDC_RP_CLIENT_ID": settings.HARNESS_OIDC_CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": settings.HARNESS_OIDC_CLIENT_SECRET,
        "OIDC_RP_SIGN_ALGO": settings.HARNESS_OIDC_SIGN_ALGO,
        "OIDC_RP_SCOPES": settings.HARNESS_OIDC_SCOPES,
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        "OIDC_STORE_ID_TOKEN": True,  # the hint that ends the session at the provider
        "OIDC_TIMEOUT": settings.HARNESS_OIDC_TIMEOUT_S,
        "OIDC_CREATE_USER": True,
        "LOGIN_REDIRECT_URL": "admin:index",
    }
    if attr in values:
        return values[attr]
    if default:
        return default[0]
    raise ImproperlyConfigured(f"{attr} has no value for the console's single sign-on")


# --- the backend ------------------------------------------------------------------------------


class ConsoleOidcBackend(OIDCAuthenticationBackend):
    """Signs in the user of a verified ID token, provisioning them and syncing their roles."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library reads every endpoint here; this backend is built for every request
        # (``get_user``), so endpoints are read when a sign-in needs them.
        self.UserModel = get_user_model()
        self.OIDC_RP_IDP_SIGN_KEY = None

    get_settings = staticmethod(oidc_setting)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("OIDC_"):
            return oidc_setting(name)
        raise AttributeError(name)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if request is None or not sso_enabled():
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.HTTPError as exc:
            raise SignInRefused(f"the identity provider refused the code: {_reason(exc)}") from exc

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """Signature with the provider's key and the registered algorithm, issuer, audience,
        expiry and issue time (the library checks the signature only)."""
        try:
            claims = jwt.decode(
                payload,
                key,
                algorithms=[settings.HARNESS_OIDC_SIGN_ALGO],
                audience=settings.HARNESS_OIDC_CLIENT_ID,
                issuer=provider_metadata()["issuer"],
                leeway=settings.HARNESS_OIDC_LEEWAY_S,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SignInRefused(f"the ID token is not valid: {exc}") from exc
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != settings.HARNESS_OIDC_CLIENT_ID:
            raise SignInRefused("the ID token names several audiences and another party")
        return claims

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        if not token:
            raise SignInRefused("the provider answered without an ID token")
        try:
            return super().verify_token(token, **kwargs)
        except SignInRefused:
            raise
        except SuspiciousOperation as exc:  # the library's nonce and key checks
            raise SignInRefused(f"the ID token is not valid: {exc}") from exc
        except (jwt.PyJWTError, requests.RequestException, KeyError, ValueError) as exc:
            raise SignInRefused(f"the ID token could not be checked: {exc}") from exc

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """The user of the ID token's (issuer, subject), made at the first sign-in; their
        roles re-synced from the token's groups. ``None`` (refused) when the groups give no
        console role."""
        try:
            return sign_in_identity(payload)
        except SignInRefused as exc:
            self.request.sso_refusal = str(exc)  # the library turns it into "no user"
            raise

    def get_user(self, user_id: Any) -> Any:
        user = super().get_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


def sign_in_identity(claims: dict[str, Any]) -> Any:
    """The console user for verified ID token ``claims`` (see ``ConsoleOidcBackend``)."""
    issuer, subject = claims["iss"], str(claims["sub"])
    groups = claims.get(settings.HARNESS_OIDC_GROUPS_CLAIM) or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise SignInRefused(f"the {settings.HARNESS_OIDC_GROUPS_CLAIM!r} claim is not a list")
    identity = (
        OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    if identity is None:
        identity = _provision(claims, issuer, subject)
    user = identity.user
    if not user.is_active:
        raise SignInRefused(f"the console user {user.get_username()!r} is deactivated")
    group_map = settings.HARNESS_OIDC_GROUP_MAP
    roles = roles_of_groups(groups, group_map)
    sync_console_roles(user, roles, group_map, actor=f"sso:{issuer}")
    identity.groups = sorted(groups)
    identity.last_login_at = timezone.now()
    identity.save(update_fields=["groups", "last_login_at"])
    if not user.is_staff:
        raise SignInRefused(
            f"{user.get_username()!r} signed in, but none of their groups gives a console role"
        )
    return user


def _provision(claims: dict[str, Any], issuer: str, subject: str) -> OidcIdentity:
    username = str(claims.get(settings.HARNESS_OIDC_USERNAME_CLAIM) or "")
    if not USERNAME.match(username):
        raise SignInRefused(
            f"the {settings.HARNESS_OIDC_USERNAME_CLAIM!r} claim {username!r} is no usable user "
            "name (1-150 letters, digits, '_', '.', '@' or '-')"
        )
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise SignInRefused(
            f"a console user named {username!r} exists and is not this identity's: single "
            "sign-on never signs into another account"
        )
    user = User.objects.create_user(username, email=str(claims.get("email") or ""))
    user.set_unusable_password()
    user.save(update_fields=["password"])
    logger.info("Single sign-on: provisioned %r for %s at %s", username, subject, issuer)
    return OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)


def _reason(exc: requests.HTTPError) -> str:
    try:
        body = exc.response.json()
    except (AttributeError, ValueError):
        return str(exc.response.status_code if exc.response is not None else exc)
    return f"{body.get('error', '')}: {body.get('error_description', '')}".strip(": ")


class BreakGlassPasswordBackend(ModelBackend):
    """Passwords while single sign-on is on: superusers only (made from the command line)."""

    def user_can_authenticate(self, user: Any) -> bool:
        return bool(getattr(user, "is_superuser", False)) and super().user_can_authenticate(user)


# --- views ------------------------------------------------------------------------------------


class ConsoleOidcLoginView(OIDCAuthenticationRequestView):
    """``/oidc/authenticate/``: to the provider's sign-in (404 while single sign-on is off)."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            return HttpResponse(status=404)
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except SignInRefused as exc:
            return refusal(request, str(exc))
        self.OIDC_RP_CLIENT_ID = settings.HARNESS_OIDC_CLIENT_ID
        return super().get(request)


class ConsoleOidcCallbackView(OIDCAuthenticationCallbackView):
    """``/oidc/callback/``: the provider's answer; a refusal is a 403 page saying why."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            return HttpResponse(status=404)
        if request.GET.get("error"):
            description = request.GET.get("error_description") or request.GET["error"]
            request.sso_refusal = f"the identity provider answered: {description}"
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            reason = str(exc)
            if "state not found" in reason:
                reason = "this sign-in was already used or was not started in this browser"
            return refusal(request, reason)

    def login_failure(self) -> HttpResponse:
        return refusal(
            self.request,
            getattr(
                self.request,
                "sso_refusal",
                "this sign-in was already used, was not started in this browser, or did not "
                "complete",
            ),
        )


def refusal(request: HttpRequest, reason: str) -> HttpResponse:
    """The console's page for a refused single sign-on: ``403`` and the reason."""
    logger.warning("Single sign-on refused: %s", reason)
    on_sso_refused(request, reason)
    return TemplateResponse(
        request,
        "admin/harness/sso_refused.html",
        {"title": "Single sign-on refused", "reason": reason, "site_header": "Harness console"},
        status=403,
    )


def provider_logout_url(request: HttpRequest, id_token: str | None) -> str | None:
    """Where to send the browser so that the provider ends its session too (RP-initiated
    logout), or ``None`` when the provider offers no ``end_session_endpoint``."""
    try:
        endpoint = provider_metadata().get("end_session_endpoint")
    except SignInRefused:
        return None
    if not endpoint:
        return None
    query = {
        "client_id": settings.HARNESS_OIDC_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri("/admin/login/"),
    }
    if id_token:
        query["id_token_hint"] = id_token
    return f"{endpoint}?{urlencode(query)}"
