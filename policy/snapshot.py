"""A tenant's policy in memory: as it is now, or with a proposed change applied, never saved.

Replay and the what-if preview ask it the same questions the live engine answers for a call
(ACL, chain rules, call rules), through the same evaluation functions, but nothing here reads a
run's state or writes anything: the labels a run holds are handed in, and a proposed change
lives only in this object (its own Casbin enforcer, loaded from the tenant's stored lines plus
and minus the proposed ones; its own rule list).

A proposed change is a list of edits shaped like the policy API's bodies::

    {"op": "add" | "remove", "permission": {"subject", "scope", "effect"}}
    {"op": "add" | "remove", "role": {"user", "role"}}
    {"op": "add", "rule": {<a rule, as POST /policies/rules takes it>}}
    {"op": "update", "rule": {"name": …, <fields, as PATCH /policies/rules/{name} takes>}}
    {"op": "remove", "rule": {"name": …}}

Each edit is checked as the API would check it (``InvalidRule``, ``RuleNotFound``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import casbin
from casbin import persist
from casbin_adapter.models import CasbinRule
from django.db.models import Q

from policy.acl import (
    EFFECTS,
    _check_name,
    _parse_scope,
    authorize_with,
    check_subject,
    describe_line,
    role_subject,
)
from policy.engine import (
    Decision,
    current_version_key,
    enforce,
    is_role_name,
    new_enforcer,
    role_as_user,
)
from policy.errors import InvalidRule, RuleNotFound
from policy.rules import (
    DEFAULT_PREFIX,
    HeldLabel,
    RuleSpec,
    RuleVerdict,
    evaluate_call_rules,
    evaluate_chain_rules,
    list_rules,
    rules_for,
    validate_rule,
)

Line = tuple[str, ...]
OPS = ("add", "remove", "update")


@dataclass(frozen=True)
class ProposedEdit:
    """One checked edit of a proposed change, and how it reads."""

    op: str
    target: str  # "permission", "role" or "rule"
    line: Line = ()
    rule: RuleSpec | None = None
    name: str = ""
    body: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        if self.target == "rule":
            return {"op": self.op, "rule": self.rule.to_dict() if self.rule else self.body}
        return {"op": self.op, **describe_line(self.line[0], list(self.line[1:]))}


class _Lines(persist.Adapter):
    def __init__(self, lines: Iterable[Line]) -> None:
        self.lines = list(lines)

    def load_policy(self, model: casbin.Model) -> None:
        for line in self.lines:
            persist.load_policy_line(", ".join(value for value in line if value), model)


@dataclass
class PolicySnapshot:
    """The policy of one tenant at one version, possibly with ``edits`` applied."""

    tenant: str
    version: int
    rules: tuple[RuleSpec, ...]
    lines: list[Line]
    edits: tuple[ProposedEdit, ...] = ()
    _enforcer: casbin.Enforcer | None = field(default=None, repr=False)
    _decisions: dict[tuple[str, str], Decision] = field(default_factory=dict, repr=False)

    @property
    def proposed(self) -> bool:
        return bool(self.edits)

    def decide(self, user: str, scope: str) -> Decision:
        key = (user, scope)
        if is_role_name(user):
            return role_as_user(user, scope, self.version)
        if key not in self._decisions:
            if self._enforcer is None:
                self._enforcer = new_enforcer(_Lines(self.lines))
            self._decisions[key] = enforce(self._enforcer, self.tenant, user, scope, self.version)
        return self._decisions[key]

    def authorize_scopes(self, user: str, scopes: Iterable[str]) -> Decision:
        return authorize_with(lambda scope: self.decide(user, scope), scopes)

    def check_chain_rules(
        self, tool: str, carries: tuple[str, ...], sink: str | None, held: Mapping[str, HeldLabel]
    ) -> RuleVerdict:
        if not (sink or carries):
            return RuleVerdict(version=self.version)
        return evaluate_chain_rules(self.rules, self.version, tool, carries, sink, held)

    def check_call_rules(
        self, tool: str, tool_approval: str, arguments: dict[str, Any]
    ) -> RuleVerdict:
        return evaluate_call_rules(self.rules, self.version, tool, tool_approval, arguments)


def policy_snapshot(tenant: str, changes: Iterable[Mapping[str, Any]] = ()) -> PolicySnapshot:
    """The tenant's current policy in memory, with the proposed ``changes`` applied (checked
    as the policy API checks them). Reads the database; writes nothing."""
    version, stamp = current_version_key(tenant)
    edits = tuple(_parse_edit(tenant, change, position) for position, change in enumerate(changes))
    if any(edit.target == "rule" for edit in edits):
        rules = list_rules(tenant)  # disabled ones too: an edit may enable one
    else:
        rules = list(rules_for(tenant, (version, stamp)))
    lines = _stored_lines(tenant)
    for edit in edits:
        if edit.target == "rule":
            rules = _apply_rule_edit(rules, edit)
        elif edit.op == "add":
            if edit.line not in lines:
                lines.append(edit.line)
        else:
            lines = [line for line in lines if line != edit.line]
    enabled = tuple(rule for rule in rules if rule.enabled)
    return PolicySnapshot(tenant=tenant, version=version, rules=enabled, lines=lines, edits=edits)


def _stored_lines(tenant: str) -> list[Line]:
    rows = (
        CasbinRule.objects.filter(Q(ptype="p", v1=tenant) | Q(ptype="g", v2=tenant))
        .order_by("id")
        .values_list("ptype", "v0", "v1", "v2", "v3", "v4")
    )
    return [_trim(tuple(value or "" for value in row)) for row in rows]


def _trim(line: Line) -> Line:
    return line[:6] if line[0] == "p" else line[:4]


def _parse_edit(tenant: str, change: Mapping[str, Any], position: int) -> ProposedEdit:
    where = {"change": position}
    if not isinstance(change, Mapping):
        raise InvalidRule("each change is an object", where)
    op = change.get("op")
    targets = [key for key in ("permission", "role", "rule") if key in change]
    if op not in OPS or len(targets) != 1:
        raise InvalidRule(
            'a change is {"op": "add" | "remove" | "update", and one of "permission", "role" '
            'or "rule"}',
            where | {"op": op},
        )
    target = targets[0]
    body = change[target]
    if not isinstance(body, Mapping):
        raise InvalidRule(f"{target} must be an object", where)
    if target != "rule" and op == "update":
        raise InvalidRule(f"a {target} is added or removed, not updated", where)
    if target == "permission":
        subject, scope = str(body.get("subject", "")), str(body.get("scope", ""))
        effect = body.get("effect", "allow")
        obj, act = _parse_scope(scope)
        check_subject(subject)
        if effect not in EFFECTS:
            raise InvalidRule(f"effect must be one of {EFFECTS}", where | {"effect": effect})
        return ProposedEdit(op, target, ("p", subject, tenant, obj, act, effect))
    if target == "role":
        user, role = str(body.get("user", "")), str(body.get("role", ""))
        _check_name("user", user)
        return ProposedEdit(op, target, ("g", user, role_subject(role), tenant))
    if op == "add":
        spec = validate_rule(dict(body))
        return ProposedEdit(op, target, rule=spec, name=spec.name)
    name = str(body.get("name", ""))
    if name.startswith(DEFAULT_PREFIX):
        raise InvalidRule(
            f"{name!r} is a shipped default: it applies to every tenant and cannot be edited.",
            where | {"rule": name},
        )
    return ProposedEdit(op, target, name=name, body=dict(body))


def _apply_rule_edit(rules: list[RuleSpec], edit: ProposedEdit) -> list[RuleSpec]:
    """``rules`` (every rule of the tenant, enabled or not) with one edit applied."""
    names = [rule.name for rule in rules]
    if edit.op == "add":
        if edit.name in names:
            raise InvalidRule(f"A rule named {edit.name!r} exists already.", {"name": edit.name})
        return [*rules, edit.rule]
    if edit.name not in names:
        raise RuleNotFound(f"No rule {edit.name!r}.", {"rule": edit.name})
    position = names.index(edit.name)
    if edit.op == "remove":
        return rules[:position] + rules[position + 1 :]
    before = rules[position]
    data = {**before.to_dict(), **edit.body, "name": edit.name}
    updated = validate_rule(data)
    return [*rules[:position], updated, *rules[position + 1 :]]
