"""Casbin decisions, one small enforcer per tenant, guarded and cached by policy version.

The model is RBAC with domains, and a request only ever matches lines of its own domain
(``r.dom == p.dom``, roles are per domain). So each tenant gets an enforcer holding only that
tenant's lines, loaded on its first decision with an indexed query: a decision costs the same
with 1 k or 100 k lines in the table, and a reload after an edit reads one tenant's lines, not
all of them. (The first version loaded every line into one enforcer: ~310 ms per uncached
decision and ~3.3 s per reload at 100 k lines; see bench/policy.py.)

pycasbin enforcers are not safe to share between threads, so one lock guards the engine of each
process. Decisions are cached per policy version: an edit bumps the version row, and the next
decision in any process sees the new number and drops its enforcers and cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import casbin
from casbin import persist
from casbin_adapter.models import CasbinRule
from django.conf import settings
from django.db.models import Q

from policy.models import PolicyVersion

MAX_CACHED_DECISIONS = 100_000
MAX_TENANT_ENFORCERS = 4_096


@dataclass(frozen=True)
class Decision:
    allowed: bool
    scope: str
    reason: str
    rule: tuple[str, ...] = ()
    version: int = 0


class _TenantLines(persist.Adapter):
    """Loads the policy lines of one domain (tenant) only."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    def load_policy(self, model: casbin.Model) -> None:
        lines = CasbinRule.objects.filter(
            Q(ptype="p", v1=self.tenant) | Q(ptype="g", v2=self.tenant)
        ).order_by("id")
        for line in lines:
            persist.load_policy_line(str(line), model)


class PolicyEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: tuple[int, str] = (-1, "")
        self._enforcers: OrderedDict[str, casbin.Enforcer] = OrderedDict()
        self._decisions: dict[tuple[str, str, str], Decision] = {}

    def decide(self, tenant: str, user: str, scope: str) -> Decision:
        """May ``user`` in ``tenant`` use ``scope`` ("object:action")? Deny overrides allow."""
        version_key = current_version_key()
        version = version_key[0]
        key = (tenant, user, scope)
        with self._lock:
            if version_key != self._version:
                self._enforcers.clear()
                self._decisions.clear()
                self._version = version_key
            cached = self._decisions.get(key)
            if cached is not None:
                return cached
            decision = self._enforce(self._enforcer(tenant), tenant, user, scope, version)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
            return decision

    def _enforcer(self, tenant: str) -> casbin.Enforcer:
        enforcer = self._enforcers.get(tenant)
        if enforcer is not None:
            self._enforcers.move_to_end(tenant)
            return enforcer
        enforcer = casbin.Enforcer(settings.CASBIN_MODEL, _TenantLines(tenant))
        self._enforcers[tenant] = enforcer
        if len(self._enforcers) > MAX_TENANT_ENFORCERS:
            self._enforcers.popitem(last=False)
        return enforcer

    @staticmethod
    def _enforce(
        enforcer: casbin.Enforcer, tenant: str, user: str, scope: str, version: int
    ) -> Decision:
        obj, _, act = scope.partition(":")
        allowed, explain = enforcer.enforce_ex(user, tenant, obj, act)
        rule = tuple(explain)
        if allowed:
            reason = f"{scope} allowed by rule {', '.join(rule)}"
        elif rule and rule[-1] == "deny":
            reason = f"{scope} denied by rule {', '.join(rule)}"
        else:
            reason = f"no rule grants {scope} to {user} in {tenant}"
        return Decision(allowed=allowed, scope=scope, reason=reason, rule=rule, version=version)


def current_version() -> int:
    return current_version_key()[0]


def current_version_key() -> tuple[int, str]:
    """The policy version and its stamp: what caches are keyed by."""
    row = PolicyVersion.objects.filter(pk=1).values_list("version", "stamp").first()
    return row or (0, "")


_engine = PolicyEngine()


def get_engine() -> PolicyEngine:
    return _engine
