"""Policy decision latency with 1 k and 100 k Casbin policy lines.

Builds a throw-away SQLite database, fills it with N policy lines spread over tenants (three
roles per tenant, 40 users assigned to them, one deny line each), and measures
``policy.services.decide`` in one process:

- miss: the first decision for a (tenant, user, scope) after the policy version changed,
- hit: a repeated decision (cache hit; still reads the version row),
- first load: the first decision of a process (loads one tenant's lines);
- after an edit of one tenant: the next decision in that tenant (reloads its lines) and in
  another tenant (still cached).

Usage: ``python bench/policy.py [--lines 1000 100000] [--samples 2000]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROLES = {
    "member": ["ticket:read", "ticket:write", "notification:send"],
    "tenant_admin": ["ticket:read", "ticket:write", "customer:read", "email:send_external"],
    "auditor": ["ticket:read", "trace:read"],
}
SCOPES = sorted({s for scopes in ROLES.values() for s in scopes} | {"order:refund"})


def setup_django(var_dir: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
    os.environ["HARNESS_VAR_DIR"] = var_dir
    os.environ.setdefault("HARNESS_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill(lines: int) -> list[tuple[str, str]]:
    """Write about ``lines`` rules; returns (tenant, user) pairs that exist."""
    from casbin_adapter.models import CasbinRule

    from policy.services import bump_policy_version

    per_tenant = sum(len(s) for s in ROLES.values()) + 1 + 40  # p lines, one deny, 40 users
    tenants = max(1, lines // per_tenant)
    rows, pairs = [], []
    for t in range(tenants):
        tenant = f"tenant-{t}"
        for role, scopes in ROLES.items():
            rows += [
                CasbinRule(
                    ptype="p",
                    v0=f"role:{role}",
                    v1=tenant,
                    v2=s.split(":")[0],
                    v3=s.split(":")[1],
                    v4="allow",
                )
                for s in scopes
            ]
        rows.append(
            CasbinRule(ptype="p", v0="user-3", v1=tenant, v2="ticket", v3="write", v4="deny")
        )
        for u in range(40):
            role = list(ROLES)[u % len(ROLES)]
            rows.append(CasbinRule(ptype="g", v0=f"user-{u}", v1=f"role:{role}", v2=tenant))
            pairs.append((tenant, f"user-{u}"))
    CasbinRule.objects.bulk_create(rows, batch_size=5000)
    bump_policy_version()
    return pairs


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(lines: int, samples: int) -> None:
    from casbin_adapter.models import CasbinRule

    from policy.services import add_permission, decide

    CasbinRule.objects.all().delete()
    pairs = fill(lines)
    total = CasbinRule.objects.count()
    rng = random.Random(7)
    started = time.perf_counter()
    decide(*pairs[0], "ticket:read")
    reload_s = time.perf_counter() - started

    keys = [(*rng.choice(pairs), rng.choice(SCOPES)) for _ in range(samples)]
    keys = list(dict.fromkeys(keys))
    misses = []
    for key in keys:
        t0 = time.perf_counter_ns()
        decide(*key)
        misses.append((time.perf_counter_ns() - t0) / 1000)
    hits = []
    for key in keys:
        t0 = time.perf_counter_ns()
        decide(*key)
        hits.append((time.perf_counter_ns() - t0) / 1000)
    edited, untouched = keys[0], next(k for k in keys if k[0] != keys[0][0])
    add_permission(edited[0], "auditor", "order:refund", "allow", actor="bench")
    started = time.perf_counter()
    decide(*untouched)
    untouched_s = time.perf_counter() - started
    started = time.perf_counter()
    decide(*edited)
    reload_after_edit_s = time.perf_counter() - started

    print(
        f"{total:>7} lines  miss median {statistics.median(misses):9.1f} µs  "
        f"p95 {percentile(misses, 95):9.1f} µs  |  hit median {statistics.median(hits):7.1f} µs  "
        f"p95 {percentile(hits, 95):7.1f} µs  |  first load {reload_s * 1000:6.1f} ms  |  "
        f"after an edit: edited tenant {reload_after_edit_s * 1000:5.1f} ms, another "
        f"{untouched_s * 1e6:5.0f} µs  ({len(keys)} keys)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--samples", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as var_dir:
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("REDIS_URL", None)
        print(f"database: SQLite in {var_dir}")
        setup_django(var_dir)
        for lines in args.lines:
            measure(lines, args.samples)


if __name__ == "__main__":
    main()
