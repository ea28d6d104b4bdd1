"""Chain rules over information-flow labels, and call rules over tool arguments.

Tool files declare what a result carries (``labels.carries``, e.g. ``pii``) and what kind of
sink a tool is (``labels.sink``, e.g. ``external``). A run holds a label from the moment a
call carrying it is allowed to run (a failed call may still have read the data, so holding is
conservative). Rules speak of labels, never of tool names, so they cover every tool that
carries or sinks them:

- ``flow``: once the run holds ``label``, a call to a ``sink`` kind (``*`` = any) is refused or
  needs approval, for the rest of the run;
- ``exclusive``: never both ``label`` and ``other_label`` in one run; the call that would bring
  in the second is refused (or needs approval);
- ``call``: a call of ``tool`` (``*`` = any) whose arguments equal every value in ``match`` is
  refused or needs approval (e.g. ``update_ticket`` with ``action`` = ``escalate``).

The shipped defaults (``DEFAULT_RULES``) apply to every tenant, always, before its own rules;
a tenant's rules can only add to them. Where several rules match, refusal beats approval.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from django.db import transaction

from policy.acl import record_change
from policy.engine import current_version_key
from policy.errors import InvalidRule, RuleNotFound
from policy.models import PolicyRule, RuleEffect, RuleKind, RunLabel

# Matched whole (``fullmatch``): ``$`` alone would also accept a trailing newline, and a rule
# naming ``"refund\n"`` would be stored and never match the tool ``refund``.
LABEL_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")
RULE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
TOOL_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}|\*")
DEFAULT_PREFIX = "default-"
ALLOW = "allow"


@dataclass(frozen=True)
class RuleSpec:
    name: str
    kind: str
    effect: str
    label: str = ""
    other_label: str = ""
    sink: str = ""
    tool: str = ""
    match: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    enabled: bool = True
    default: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        name="default-pii-no-external",
        kind=RuleKind.FLOW,
        effect=RuleEffect.REFUSE,
        label="pii",
        sink="external",
        description="Once a run holds personal data, nothing may leave the company.",
        default=True,
    ),
    RuleSpec(
        name="default-escalation-approval",
        kind=RuleKind.CALL,
        effect=RuleEffect.REQUIRE_APPROVAL,
        tool="update_ticket",
        match={"action": "escalate"},
        description="Escalating a ticket needs a human approver.",
        default=True,
    ),
)


@dataclass(frozen=True)
class RuleVerdict:
    """The outcome of the rule checks for one call: ``allow``, ``refuse`` or
    ``require_approval``, the rule that matched, and why."""

    effect: str = ALLOW
    rule: str = ""
    reason: str = ""
    version: int = 0
    label: str = ""
    source_call_id: str = ""
    source_tool: str = ""

    @property
    def allowed(self) -> bool:
        return self.effect == ALLOW

    def attributes(self) -> dict[str, Any]:
        data = {"rule": self.rule, "reason": self.reason, "policy_version": self.version}
        if self.label:
            data |= {
                "label": self.label,
                "source_call_id": self.source_call_id,
                "source_tool": self.source_tool,
            }
        return data


# --- checks ----------------------------------------------------------------------------------


def check_call_rules(
    tenant: str, tool: str, tool_approval: str, arguments: dict[str, Any]
) -> RuleVerdict:
    """Call rules and the tool's own ``approval`` setting, for arguments already validated."""
    version, stamp = current_version_key(tenant)
    return evaluate_call_rules(
        rules_for(tenant, (version, stamp)), version, tool, tool_approval, arguments
    )


class HeldLabel(Protocol):
    """A label a run holds, and the call that brought it in (a ``RunLabel`` row, or a
    ``HeldLabelValue`` kept in memory by a replay)."""

    label: str
    call_id: str
    tool: str


@dataclass(frozen=True)
class HeldLabelValue:
    label: str
    call_id: str
    tool: str


def evaluate_chain_rules(
    rules: Iterable[RuleSpec],
    version: int,
    tool: str,
    carries: tuple[str, ...],
    sink: str | None,
    held: Mapping[str, HeldLabel],
) -> RuleVerdict:
    """The flow and exclusive ``rules`` for one call, given the labels the run ``held``;
    pure: reads and writes nothing."""
    verdicts = []
    for rule in rules:
        if rule.kind == RuleKind.FLOW and sink and rule.sink in (sink, "*"):
            source = held.get(rule.label)
            if source:
                verdicts.append(
                    _label_verdict(rule, version, source, f"{tool} is an {sink!r} sink")
                )
        elif rule.kind == RuleKind.EXCLUSIVE:
            for have, bring in ((rule.label, rule.other_label), (rule.other_label, rule.label)):
                source = held.get(have)
                if source and bring in carries and bring not in held:
                    reason = f"{tool} would bring in {bring!r}, and never both may be in one run"
                    verdicts.append(_label_verdict(rule, version, source, reason))
    return _strictest(verdicts) or RuleVerdict(version=version)


def evaluate_call_rules(
    rules: Iterable[RuleSpec],
    version: int,
    tool: str,
    tool_approval: str,
    arguments: dict[str, Any],
) -> RuleVerdict:
    """The call ``rules`` and the tool's own ``approval`` setting for one call; pure."""
    verdicts = call_rule_verdicts(rules, version, tool, tool_approval, arguments)
    return _strictest(verdicts) or RuleVerdict(version=version)


def call_rule_verdicts(
    rules: Iterable[RuleSpec],
    version: int,
    tool: str,
    tool_approval: str,
    arguments: dict[str, Any],
) -> list[RuleVerdict]:
    """Every call rule (and the tool's ``approval: always``) matching one call, in rule order:
    an approver's edit is re-decided against all of them, not only the strictest; pure."""
    verdicts = []
    if tool_approval == "always":
        verdicts.append(
            RuleVerdict(
                effect=RuleEffect.REQUIRE_APPROVAL,
                rule="tool-approval-always",
                reason=f"{tool} is declared to need approval for every call",
                version=version,
            )
        )
    for rule in rules:
        if rule.kind != RuleKind.CALL or rule.tool not in (tool, "*"):
            continue
        if rule.effect == RuleEffect.REQUIRE_APPROVAL and tool_approval == "never":
            continue
        if all(arguments.get(key) == value for key, value in rule.match.items()):
            shown = ", ".join(f"{k}={v!r}" for k, v in rule.match.items()) or "any arguments"
            verdicts.append(
                RuleVerdict(
                    effect=rule.effect,
                    rule=rule.name,
                    reason=f"{tool} with {shown}",
                    version=version,
                )
            )
    return verdicts


def record_labels(run_id: str, labels: list[HeldLabelValue]) -> None:
    """Store labels a driver noted in memory (one multi-row INSERT; the first call wins)."""
    if labels:
        RunLabel.objects.bulk_create(
            [
                RunLabel(run_id=run_id, label=h.label, call_id=h.call_id, tool=h.tool)
                for h in labels
            ],
            ignore_conflicts=True,
        )


def list_labels(run_id: str) -> list[RunLabel]:
    return list(RunLabel.objects.filter(run_id=run_id))


def run_ids_holding(label: str) -> list[str]:
    """The ids of the runs that hold ``label`` (read data carrying it)."""
    return list(RunLabel.objects.filter(label=label).values_list("run_id", flat=True))


def _label_verdict(rule: RuleSpec, version: int, source: HeldLabel, why: str) -> RuleVerdict:
    action = "refused" if rule.effect == RuleEffect.REFUSE else "held for approval"
    return RuleVerdict(
        effect=rule.effect,
        rule=rule.name,
        reason=(
            f"{action} by rule {rule.name} (policy v{version}): this run holds "
            f"{source.label!r} since call {source.call_id} ({source.tool}), and {why}"
        ),
        version=version,
        label=source.label,
        source_call_id=source.call_id,
        source_tool=source.tool,
    )


def _strictest(verdicts: list[RuleVerdict]) -> RuleVerdict | None:
    refusals = [v for v in verdicts if v.effect == RuleEffect.REFUSE]
    return (refusals or verdicts or [None])[0]


# --- the rule set of a tenant, cached per policy version -------------------------------------

_cache_lock = threading.Lock()
_cache: dict[tuple[str, tuple[int, str]], tuple[RuleSpec, ...]] = {}
MAX_CACHED_TENANTS = 4_096


def rules_for(tenant: str, version: tuple[int, str]) -> tuple[RuleSpec, ...]:
    """Defaults, then the tenant's enabled rules, as of ``version`` (number and stamp)."""
    key = (tenant, version)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    stored = tuple(_spec(row) for row in PolicyRule.objects.filter(tenant=tenant, enabled=True))
    rules = DEFAULT_RULES + stored
    with _cache_lock:
        # Versions are per tenant: drop this tenant's older entries only.
        for stale in [k for k in _cache if k[0] == tenant and k[1] != version]:
            del _cache[stale]
        if len(_cache) >= MAX_CACHED_TENANTS:
            _cache.clear()
        _cache[key] = rules
    return rules


def _spec(row: PolicyRule) -> RuleSpec:
    return RuleSpec(
        name=row.name,
        kind=row.kind,
        effect=row.effect,
        label=row.label,
        other_label=row.other_label,
        sink=row.sink,
        tool=row.tool,
        match=row.match or {},
        description=row.description,
        enabled=row.enabled,
    )


# --- audited edits ---------------------------------------------------------------------------

RULE_FIELDS = (
    "kind",
    "effect",
    "label",
    "other_label",
    "sink",
    "tool",
    "match",
    "description",
    "enabled",
)


def list_rules(tenant: str) -> list[RuleSpec]:
    """The defaults (``default: true``) and every rule of the tenant, enabled or not."""
    return [*DEFAULT_RULES, *(_spec(r) for r in PolicyRule.objects.filter(tenant=tenant))]


def get_rule(tenant: str, name: str) -> RuleSpec:
    for rule in DEFAULT_RULES:
        if rule.name == name:
            return rule
    row = PolicyRule.objects.filter(tenant=tenant, name=name).first()
    if row is None:
        raise RuleNotFound(f"No rule {name!r} in {tenant}.", {"rule": name})
    return _spec(row)


@transaction.atomic
def create_rule(tenant: str, data: dict[str, Any], actor: str) -> tuple[RuleSpec, int]:
    """Store a tenant rule; returns it and the policy version the edit produced."""
    spec = validate_rule(data)
    if PolicyRule.objects.filter(tenant=tenant, name=spec.name).exists():
        raise InvalidRule(f"A rule named {spec.name!r} exists already.", {"name": spec.name})
    PolicyRule.objects.create(tenant=tenant, updated_by=actor, **_columns(spec))
    version = record_change(tenant, actor, "add", ["rule", spec.name], None, spec.to_dict())
    return spec, version


@transaction.atomic
def update_rule(tenant: str, name: str, data: dict[str, Any], actor: str) -> tuple[RuleSpec, int]:
    row = _editable_row(tenant, name)
    before = _spec(row)
    spec = validate_rule({**before.to_dict(), **data, "name": name})
    for key, value in _columns(spec).items():
        setattr(row, key, value)
    row.updated_by = actor
    row.save()
    version = record_change(
        tenant, actor, "update", ["rule", name], before.to_dict(), spec.to_dict()
    )
    return spec, version


@transaction.atomic
def delete_rule(tenant: str, name: str, actor: str) -> int:
    row = _editable_row(tenant, name)
    before = _spec(row)
    row.delete()
    return record_change(tenant, actor, "remove", ["rule", name], before.to_dict(), None)


def _editable_row(tenant: str, name: str) -> PolicyRule:
    if name.startswith(DEFAULT_PREFIX):
        raise InvalidRule(
            f"{name!r} is a shipped default: it applies to every tenant and cannot be edited.",
            {"rule": name},
        )
    row = PolicyRule.objects.select_for_update().filter(tenant=tenant, name=name).first()
    if row is None:
        raise RuleNotFound(f"No rule {name!r} in {tenant}.", {"rule": name})
    return row


def _columns(spec: RuleSpec) -> dict[str, Any]:
    return {"name": spec.name} | {key: getattr(spec, key) for key in RULE_FIELDS}


def validate_rule(data: dict[str, Any]) -> RuleSpec:
    """Check a rule's shape for its kind; raises ``InvalidRule`` naming the field."""
    name = str(data.get("name", ""))
    if not RULE_NAME_PATTERN.fullmatch(name):
        raise InvalidRule("name: 1-100 lower-case letters, digits, '_' or '-'", {"name": name})
    if name.startswith(DEFAULT_PREFIX):
        raise InvalidRule(f"names starting {DEFAULT_PREFIX!r} are reserved", {"name": name})
    kind, effect = data.get("kind"), data.get("effect")
    if kind not in RuleKind.values:
        raise InvalidRule(f"kind must be one of {RuleKind.values}", {"kind": kind})
    if effect not in RuleEffect.values:
        raise InvalidRule(f"effect must be one of {RuleEffect.values}", {"effect": effect})
    values = {key: data.get(key) or "" for key in ("label", "other_label", "sink", "tool")}
    match = data.get("match") or {}
    needed = {
        RuleKind.FLOW: {"label", "sink"},
        RuleKind.EXCLUSIVE: {"label", "other_label"},
        RuleKind.CALL: {"tool"},
    }[RuleKind(kind)]
    for key, value in values.items():
        if key in needed and not value:
            raise InvalidRule(f"a {kind} rule needs {key!r}", {"field": key})
        if key not in needed and value:
            raise InvalidRule(f"a {kind} rule takes no {key!r}", {"field": key})
    for key in ("label", "other_label"):
        if values[key] and not LABEL_PATTERN.fullmatch(values[key]):
            raise InvalidRule(f"{key} must be a label such as 'pii'", {"field": key})
    if values["sink"] and values["sink"] != "*" and not LABEL_PATTERN.fullmatch(values["sink"]):
        raise InvalidRule("sink must be a sink kind such as 'external', or '*'", {"field": "sink"})
    if values["tool"] and not TOOL_PATTERN.fullmatch(values["tool"]):
        raise InvalidRule("tool must be a tool name, or '*'", {"field": "tool"})
    if kind == RuleKind.EXCLUSIVE and values["label"] == values["other_label"]:
        raise InvalidRule("an exclusive rule needs two different labels", {"field": "other_label"})
    if not isinstance(match, dict) or (match and kind != RuleKind.CALL):
        raise InvalidRule(
            "match is an object of argument values, for call rules only", {"field": "match"}
        )
    if any(isinstance(v, dict | list) for v in match.values()):
        raise InvalidRule(
            "match values must be strings, numbers, booleans or null", {"field": "match"}
        )
    return RuleSpec(
        name=name,
        kind=kind,
        effect=effect,
        match=match,
        description=str(data.get("description") or ""),
        enabled=bool(data.get("enabled", True)),
        **values,
    )
