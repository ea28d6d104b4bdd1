"""Casbin decisions, one small enforcer per tenant, guarded and cached by the tenant's policy
version.

The model is RBAC with domains, and a request only ever matches lines of its own domain
(``r.dom == p.dom``, roles are per domain). So each tenant gets an enforcer holding only that
tenant's lines, loaded on its first decision with an indexed query: a decision costs the same
with 1 k or 100 k lines in the table, and a reload after an edit reads one tenant's lines, not
all of them. (The first version loaded every line into one enforcer: ~310 ms per uncached
decision and ~3-4 s per reload at 100 k lines; now ~2-4 ms and ~4 ms; see bench/policy.py.)

Users and roles live in separate namespaces: a role is always stored and matched as
``role:<name>`` (``ROLE_PREFIX``), and a user id can never be in that namespace (a decision
for such a "user" is refused). So an end user called ``tenant_admin`` is just a user.

pycasbin enforcers are not safe to share between threads, so one lock guards the engine of each
process. Versions are per tenant (``TenantPolicyVersion``): every edit bumps its tenant's row,
and each decision reads that one row (one raw query: through the ORM it cost ~600 µs on SQLite,
more than a cached decision itself, ~25 µs); when it differs from the version the tenant's
enforcer and cached decisions were filled at, those are dropped. Other tenants' caches stay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import casbin
from casbin import persist
from casbin_adapter.models import CasbinRule
from django.conf import settings
from django.db import connection
from django.db.models import Q

from policy.models import TenantPolicyVersion

MAX_CACHED_DECISIONS = 100_000
MAX_TENANT_ENFORCERS = 4_096
# Roles are stored and matched as "role:<name>"; no user id may start with it.
ROLE_PREFIX = "role:"


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
        lines = (
            CasbinRule.objects.filter(Q(ptype="p", v1=self.tenant) | Q(ptype="g", v2=self.tenant))
            .order_by("id")
            .values_list("ptype", "v0", "v1", "v2", "v3", "v4")
        )
        for line in lines:
            persist.load_policy_line(", ".join(value for value in line if value), model)


class PolicyEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[str, tuple[int, str]] = {}
        self._enforcers: OrderedDict[str, casbin.Enforcer] = OrderedDict()
        self._decisions: dict[str, dict[tuple[str, str], Decision]] = {}
        self._cached = 0

    def decide(self, tenant: str, user: str, scope: str) -> Decision:
        """May ``user`` in ``tenant`` use ``scope`` ("object:action")? Deny overrides allow."""
        version_key = current_version_key(tenant)
        version = version_key[0]
        if is_role_name(user):
            return role_as_user(user, scope, version)
        key = (user, scope)
        with self._lock:
            if self._versions.get(tenant) != version_key:
                self._forget(tenant)
                self._versions[tenant] = version_key
            cached = self._decisions.get(tenant, {}).get(key)
            if cached is not None:
                return cached
            decision = self._enforce(self._enforcer(tenant), tenant, user, scope, version)
            if self._cached >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
                self._cached = 0
            self._decisions.setdefault(tenant, {})[key] = decision
            self._cached += 1
            return decision

    def _forget(self, tenant: str) -> None:
        """Drop what is cached for ``tenant``."""
        self._enforcers.pop(tenant, None)
        self._cached -= len(self._decisions.pop(tenant, {}))
        if len(self._versions) > MAX_TENANT_ENFORCERS:
            self._versions.clear()

    def _enforcer(self, tenant: str) -> casbin.Enforcer:
        enforcer = self._enforcers.get(tenant)
        if enforcer is not None:
            self._enforcers.move_to_end(tenant)
            return enforcer
        enforcer = new_enforcer(_TenantLines(tenant))
        self._enforcers[tenant] = enforcer
        if len(self._enforcers) > MAX_TENANT_ENFORCERS:
            self._enforcers.popitem(last=False)
        return enforcer

    @staticmethod
    def _enforce(
        enforcer: casbin.Enforcer, tenant: str, user: str, scope: str, version: int
    ) -> Decision:
        return enforce(enforcer, tenant, user, scope, version)


def new_enforcer(adapter: persist.Adapter) -> casbin.Enforcer:
    """An enforcer of our model holding the lines ``adapter`` loads (never saved back)."""
    enforcer = casbin.Enforcer(settings.CASBIN_MODEL)
    # pycasbin's domain role manager compares role names through an equality *function*
    # by default, which makes loading O(links x roles) (~6 ms for 40 users); without one
    # it compares names directly. Our model has no role patterns.
    for role_manager in enforcer.rm_map.values():
        role_manager.matching_func = None
    enforcer.set_adapter(adapter)
    enforcer.load_policy()
    return enforcer


def enforce(
    enforcer: casbin.Enforcer, tenant: str, user: str, scope: str, version: int
) -> Decision:
    """One decision of ``enforcer``, with the rule that decided it and why, in words."""
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


def is_role_name(subject: str) -> bool:
    return subject.startswith(ROLE_PREFIX)


def role_as_user(user: str, scope: str, version: int) -> Decision:
    """The refusal of a "user" id in the roles' namespace: roles are never end users."""
    return Decision(
        allowed=False,
        scope=scope,
        reason=f"{user!r} is in the roles' namespace ({ROLE_PREFIX}…), not a user id",
        version=version,
    )


def current_version(tenant: str) -> int:
    return current_version_key(tenant)[0]


def current_version_key(tenant: str) -> tuple[int, str]:
    """The tenant's policy version and its stamp: what the tenant's caches are keyed by."""
    with connection.cursor() as cursor:
        cursor.execute(_VERSION_SQL, [tenant])
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, "")


_VERSION_SQL = f"SELECT version, stamp FROM {TenantPolicyVersion._meta.db_table} WHERE tenant = %s"  # noqa: S608


def version_key_sql() -> tuple[str, str]:
    """Two scalar subqueries (version, stamp) of one tenant's policy version, each taking the
    tenant as its one parameter: for a caller that reads the version in a statement it sends
    anyway (the run engine's fenced checkpoint), instead of a query of its own. A tenant with
    no row yet reads as NULL: version 0, stamp ""."""
    table = TenantPolicyVersion._meta.db_table
    return (
        f"(SELECT version FROM {table} WHERE tenant = %s)",  # noqa: S608
        f"(SELECT stamp FROM {table} WHERE tenant = %s)",  # noqa: S608
    )


_engine = PolicyEngine()


def get_engine() -> PolicyEngine:
    return _engine
