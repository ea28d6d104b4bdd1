"""Casbin decisions, guarded and cached by policy version.

pycasbin enforcers are not safe to share between threads, so one lock guards the enforcer of
each process. Decisions are cached per policy version: a rule edit bumps the version row, and
the next decision in any process sees the new number, reloads the rules and drops its cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import casbin
from casbin_adapter.adapter import Adapter
from django.conf import settings

from policy.models import PolicyVersion

MAX_CACHED_DECISIONS = 100_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    scope: str
    reason: str
    rule: tuple[str, ...] = ()
    version: int = 0


class PolicyEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enforcer: casbin.Enforcer | None = None
        self._version = -1
        self._decisions: dict[tuple[str, str, str], Decision] = {}

    def decide(self, tenant: str, user: str, scope: str) -> Decision:
        """May ``user`` in ``tenant`` use ``scope`` ("object:action")? Deny overrides allow."""
        version = current_version()
        key = (tenant, user, scope)
        with self._lock:
            if version != self._version:
                self._reload(version)
            cached = self._decisions.get(key)
            if cached is not None:
                return cached
            decision = self._enforce(tenant, user, scope, version)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
            return decision

    def _reload(self, version: int) -> None:
        self._enforcer = casbin.Enforcer(settings.CASBIN_MODEL, Adapter())
        self._version = version
        self._decisions.clear()

    def _enforce(self, tenant: str, user: str, scope: str, version: int) -> Decision:
        assert self._enforcer is not None
        obj, _, act = scope.partition(":")
        allowed, explain = self._enforcer.enforce_ex(user, tenant, obj, act)
        rule = tuple(explain)
        if allowed:
            reason = f"{scope} allowed by rule {', '.join(rule)}"
        elif rule and rule[-1] == "deny":
            reason = f"{scope} denied by rule {', '.join(rule)}"
        else:
            reason = f"no rule grants {scope} to {user} in {tenant}"
        return Decision(allowed=allowed, scope=scope, reason=reason, rule=rule, version=version)


def current_version() -> int:
    row = PolicyVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    return row or 0


_engine = PolicyEngine()


def get_engine() -> PolicyEngine:
    return _engine
