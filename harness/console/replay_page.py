"""Replay and what-if for people: each verdict a labelled badge with what it means, each
refusal naming its check and its rule (linked to the policy that holds it), each call linked
to where it is in its run's timeline, and the answer's change as a diff of masked text.

Plain functions over the dicts ``harness.replay`` returns; the views only call them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from casbin_adapter.models import CasbinRule
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from harness.console.text_diff import diff_texts, render_diff
from policy.models import PolicyRule
from traces.services import new_masker

if TYPE_CHECKING:
    from traces.masking import Masker


@dataclass(frozen=True)
class Badge:
    label: str
    tone: str  # a status badge's colour (timeline.css: .run-status.status-<tone>)
    meaning: str  # the badge's title: what it means, in a sentence


VERDICTS = {
    "allowed": Badge("Allowed", "ok", "The decision chain lets the call run."),
    "refused": Badge(
        "Refused", "failed", "A check of the decision chain refuses the call: it does not run."
    ),
    "needs_approval": Badge(
        "Needs approval", "held", "A rule holds the call until a person approves it."
    ),
    "not_executed": Badge(
        "Not executed", "stopped", "The loop stopped the call as a repeat of an earlier one."
    ),
}

DIVERGENCES = {
    "now_refused": Badge(
        "Now refused", "failed", "The recorded run let this call through; today it is refused."
    ),
    "now_allowed": Badge(
        "Now allowed", "ok", "The recorded run refused or held this call; today it would run."
    ),
    "now_needs_approval": Badge(
        "Now needs approval", "held", "The call ran without approval then; today a rule holds it."
    ),
    "now_not_executed": Badge(
        "Now not executed", "stopped", "Today the loop would stop this call as a repeat."
    ),
    "validation_changed": Badge(
        "Validation changed",
        "refused",
        "The tool's JSON Schema finds other faults in the arguments than it did then.",
    ),
    "refused_differently": Badge(
        "Refused differently", "refused", "Refused then and now, by another check or rule."
    ),
    "rule_changed": Badge(
        "Rule changed", "refused", "Decided alike, but by another rule than then."
    ),
    "arguments_changed": Badge(
        "Arguments read differently",
        "busy",
        "Today's gateway reads the raw arguments the model sent as other values.",
    ),
}
SAME = Badge("Same", "waiting", "Decided today exactly as the recorded run decided it.")

# The checks of the decision chain, in its order (harness/engine/decisions.py).
CHECKS = {
    "tool_enabled": "Tool enabled",
    "acl": "ACL",
    "chain": "Chain rule",
    "arguments_json": "Arguments JSON",
    "schema": "Schema",
    "call_rule": "Call rule",
    "approval": "Approval",
    "limit": "Limit",
}
RULE_CHECKS = ("chain", "call_rule", "approval")
NOT_SAVED = "not a saved rule of the tenant: a shipped default, or the change previewed"


def verdict_badge(verdict: str) -> Badge:
    return VERDICTS.get(verdict, Badge(verdict.replace("_", " ").capitalize(), "waiting", ""))


def divergence_badge(divergence: str | None) -> Badge:
    if not divergence:
        return SAME
    fallback = Badge(divergence.replace("_", " ").capitalize(), "refused", "")
    return DIVERGENCES.get(divergence, fallback)


@dataclass(frozen=True)
class RuleRef:
    """What decided a call, as the page names it: the rule (a policy rule's name, a limit, a
    permission line), where it is kept (``url``, "" if nowhere to go) and how it reads."""

    name: str
    url: str
    note: str = ""


@dataclass(frozen=True)
class VerdictView:
    verdict: str
    badge: Badge
    check: str  # the check's label, "" when none decided
    rule: RuleRef | None
    reason: str
    violations: list[str]


def verdict_view(tenant: str, verdict: dict[str, Any], masker: Masker) -> VerdictView:
    """One verdict (``Verdict.to_dict()``) as the page shows it; its reason and schema
    violations (which may quote the arguments) masked, as the run's page shows them."""
    check = verdict.get("check", "")
    return VerdictView(
        verdict=verdict["verdict"],
        badge=verdict_badge(verdict["verdict"]),
        check=CHECKS.get(check, check.replace("_", " ")),
        rule=rule_ref(tenant, verdict),
        reason=masker.mask(verdict.get("reason", "")),
        violations=[
            masker.mask(f"{v.get('at') or '/'}: {v.get('problem', '')}")
            for v in verdict.get("violations") or []
        ],
    )


def rule_ref(tenant: str, verdict: dict[str, Any]) -> RuleRef | None:
    """The rule that decided ``verdict``, linked to its row in the console where it has one:
    a tenant's policy rule (a shipped default, or a rule only previewed, has none), the
    permission line of an ACL refusal (or the tenant's permissions, when no line grants the
    scope). A limit is named only: it is the run's own (its budget ledger), not a policy
    rule."""
    check, rule = verdict.get("check", ""), verdict.get("rule", "")
    if check in RULE_CHECKS and rule:
        row = PolicyRule.objects.filter(tenant=tenant, name=rule).values_list("pk", flat=True)
        if row:
            return RuleRef(rule, reverse("admin:policy_policyrule_change", args=[row[0]]))
        return RuleRef(rule, "", NOT_SAVED)
    if check == "acl" and verdict["verdict"] == "refused":
        return _permission_ref(tenant, verdict.get("permission", ""))
    if check == "limit" and rule:
        return RuleRef(rule, "", "a tool-call limit of the run")
    return None


def _permission_ref(tenant: str, line: str) -> RuleRef:
    listing = reverse("admin:casbin_adapter_casbinrule_changelist")
    fields = [field.strip() for field in line.split(",")] if line else []
    if len(fields) != 5:
        return RuleRef("no permission grants it", f"{listing}?{urlencode({'q': tenant})}")
    subject, domain, obj, act, effect = fields
    row = CasbinRule.objects.filter(
        ptype="p", v0=subject, v1=domain, v2=obj, v3=act, v4=effect
    ).values_list("pk", flat=True)
    name = f"{subject} {obj}:{act} {effect}"
    if row:
        url = reverse("admin:casbin_adapter_casbinrule_change", args=[row[0]])
        return RuleRef(name, url, "a permission line")
    listing = f"{listing}?{urlencode({'q': subject})}"
    return RuleRef(name, listing, "a permission line not saved: the change previewed")


@dataclass(frozen=True)
class CallView:
    step: int
    call_id: str
    tool: str
    before: VerdictView
    after: VerdictView
    divergence: Badge
    diverged: bool
    anchor: str  # the call on its run's page
    # Arguments today's gateway reads differently: recorded → today, as a diff ("" if alike).
    arguments_diff: SafeString | str = ""


def call_views(tenant: str, calls: Iterable[tuple[Any, dict[str, Any]]]) -> list[CallView]:
    """Replayed calls (``CallReplay.to_dict()``, or what-if changes, which have no divergence
    of their own), each with the pk of its run, as the page's rows (one masker for all)."""
    masker = new_masker(tenant)
    return [_call_view(tenant, run_pk, call, masker) for run_pk, call in calls]


def _call_view(tenant: str, run_pk: Any, call: dict[str, Any], masker: Masker) -> CallView:
    page = reverse("admin:harness_run_change", args=[run_pk])
    return CallView(
        step=call["step"],
        call_id=call["call_id"],
        tool=call["tool"],
        before=verdict_view(tenant, call["before"], masker),
        after=verdict_view(tenant, call["after"], masker),
        divergence=divergence_badge(call.get("divergence")),
        diverged=bool(call.get("divergence")),
        anchor=call_anchor(page, call["call_id"]),
        arguments_diff=_arguments_diff(call, masker),
    )


def _arguments_diff(call: dict[str, Any], masker: Masker) -> SafeString | str:
    if "recorded_arguments" not in call:
        return ""
    then, now = (
        json.dumps(masker.mask(call[key]), ensure_ascii=False, indent=1, sort_keys=True)
        for key in ("recorded_arguments", "arguments")
    )
    return render_diff(diff_texts(then, now))


def call_anchor(run_page: str, call_id: str) -> str:
    """Where ``call_id`` is on its run's page: the proposed call in the timeline
    (``id="call-<id>"``, timeline.html)."""
    return f"{run_page}#call-{quote(call_id, safe='')}"


@dataclass(frozen=True)
class AnswerView:
    changed: bool
    recorded: str
    replayed: str
    diff: SafeString


def answer_view(tenant: str, answer: dict[str, Any]) -> AnswerView:
    """The recorded and the replayed answer, masked as the run's page shows text (replay
    reads the clear copy), and their diff."""
    masker = new_masker(tenant)
    recorded = masker.mask(answer.get("recorded") or "")
    replayed = masker.mask(answer.get("replayed") or "")
    return AnswerView(
        changed=bool(answer.get("changed")),
        recorded=recorded,
        replayed=replayed,
        diff=render_diff(diff_texts(recorded, replayed)),
    )
