"""A policy edit reaches another process on its next decision, without a restart."""

import os
import subprocess
import sys

from django.conf import settings

from tests.worker import database_url

# Another process: decides, then waits for a line on stdin before each further decision.
DECIDER = """
import os, sys
import django
django.setup()
from policy.services import check_call_rules, decide
for line in sys.stdin:
    decision = decide("acme", "dave", "customer:read")
    verdict = check_call_rules("acme", "get_ticket", "policy", {"ticket_id": "T-1"})
    print(decision.allowed, decision.version, verdict.effect, flush=True)
"""


class Decider:
    def __init__(self) -> None:
        env = os.environ | {
            "DJANGO_SETTINGS_MODULE": "harness.settings.test",
            "DATABASE_URL": database_url(),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", DECIDER],
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self) -> tuple[str, int, str]:
        assert self.process.stdin
        assert self.process.stdout
        self.process.stdin.write("decide\n")
        self.process.stdin.flush()
        allowed, version, effect = self.process.stdout.readline().split()
        return allowed, int(version), effect

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def test_a_grant_and_a_rule_reach_a_running_process_on_its_next_decision(acme):
    other = Decider()
    try:
        before = other.ask()
        assert before[0] == "False"
        assert before[2] == "allow"
        granted = acme.post(
            "/api/v1/policies/permissions",
            {"subject": "dave", "scope": "customer:read"},
            **{"X-Harness-User": "alice"},
        ).json()["policy_version"]
        after_grant = other.ask()
        ruled = acme.post(
            "/api/v1/policies/rules",
            {"name": "no-reads", "kind": "call", "tool": "get_ticket", "effect": "refuse"},
            **{"X-Harness-User": "alice"},
        ).json()["policy_version"]
        after_rule = other.ask()
    finally:
        other.close()

    assert after_grant == ("True", granted, "allow")
    assert after_rule == ("True", ruled, "refuse")
