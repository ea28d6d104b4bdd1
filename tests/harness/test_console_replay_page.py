"""How the replay and what-if pages name verdicts, divergences and rules (the pages
themselves: test_admin_replay.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.console.replay_page import (
    CHECKS,
    DIVERGENCES,
    NOT_SAVED,
    VERDICTS,
    RuleRef,
    divergence_badge,
    rule_ref,
    verdict_badge,
)
from harness.replay.run import ALLOWED, NEEDS_APPROVAL, NOT_EXECUTED, REFUSED, CallReplay, Verdict

VERDICT_VALUES = st.builds(
    Verdict,
    verdict=st.sampled_from([ALLOWED, REFUSED, NEEDS_APPROVAL, NOT_EXECUTED]),
    check=st.sampled_from(["", *CHECKS]),
    rule=st.sampled_from(["", "a-rule", "another-rule"]),
    violations=st.sampled_from([(), ({"at": "/a", "problem": "bad"},)]),
)


@given(VERDICT_VALUES, VERDICT_VALUES, st.booleans())
def test_every_divergence_replay_can_report_has_a_label_a_colour_and_a_meaning(
    before, after, arguments_changed
):
    replayed = CallReplay(1, "call_1", "tool", before, after, arguments_changed)

    badge = divergence_badge(replayed.divergence)

    assert replayed.divergence == "" or replayed.divergence in DIVERGENCES
    assert all((badge.label, badge.tone, badge.meaning))
    assert verdict_badge(after.verdict) is VERDICTS[after.verdict]


def test_now_refused_reads_as_red_and_says_why():
    badge = divergence_badge("now_refused")

    assert (badge.label, badge.tone) == ("Now refused", "failed")
    assert "today it is refused" in badge.meaning


def test_a_rule_without_a_row_is_named_unlinked_and_a_limit_is_named(demo):
    shipped = {"verdict": "needs_approval", "check": "approval"}
    shipped["rule"] = "default-escalation-approval"
    limit = {"verdict": "refused", "check": "limit", "rule": "max_calls_per_tool"}

    assert rule_ref("acme", shipped) == RuleRef("default-escalation-approval", "", NOT_SAVED)
    assert rule_ref("acme", limit) == RuleRef(
        "max_calls_per_tool", "", "a tool-call limit of the run"
    )
    assert rule_ref("acme", {"verdict": "refused", "check": "schema"}) is None
    assert rule_ref("acme", {"verdict": "allowed"}) is None


def test_an_acl_refusal_no_line_grants_links_to_the_tenants_permissions(demo):
    ref = rule_ref("acme", {"verdict": "refused", "check": "acl"})

    assert ref == RuleRef("no permission grants it", "/admin/casbin_adapter/casbinrule/?q=acme")
