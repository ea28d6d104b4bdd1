"""The console's policy editor: a structured form for one edit (a call rule, a chain rule, a
permission or a role assignment), turned into the change the what-if API takes, checked by the
API's own serializers, previewed over recent runs and saved through the policy services.

Plain functions and a shape-only form: the meaning of an edit is checked once, by
``policy.api.serializers.WhatIfSerializer`` (the body of ``POST /api/v1/policies/what-if``)
and then by the services it reaches; their errors come back here keyed by the form's fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from rest_framework.exceptions import ValidationError as ApiValidationError

from policy import services as policy
from policy.api.serializers import WhatIfSerializer, refuse_rules_that_never_fire
from policy.errors import PolicyError

RULE_KINDS = ("call", "flow", "exclusive")
KINDS = [
    ("call", "Call rule: calls of a tool with given arguments"),
    ("flow", "Chain rule: after a label, a sink"),
    ("exclusive", "Chain rule: never two labels in one run"),
    ("permission", "ACL: a permission line"),
    ("role", "ACL: a role assignment"),
]
OPS = [("add", "add"), ("update", "update (rules)"), ("remove", "remove")]
RULE_EFFECTS = [("refuse", "refuse"), ("require_approval", "require approval")]
ACL_EFFECTS = [("allow", "allow"), ("deny", "deny")]
# The fields of each kind of edit, in the form's order (the rest are hidden for that kind).
FIELDS_OF = {
    "call": ["name", "tool", "match", "effect", "description", "enabled"],
    "flow": ["name", "label", "sink", "effect", "description", "enabled"],
    "exclusive": ["name", "label", "other_label", "effect", "description", "enabled"],
    "permission": ["subject", "scope", "acl_effect"],
    "role": ["user", "role"],
}
# Where a field of an API body is shown on the form (the rest keep their own names).
FORM_FIELD = {"permission.effect": "acl_effect"}


def _text(label: str, help_text: str = "", **kwargs: Any) -> forms.CharField:
    # Shape only: what a value may be is the API serializers' to say, not the form's.
    # Untrimmed: what the API checks is what would be stored (" pii" is refused, not fixed).
    return forms.CharField(label=label, required=False, help_text=help_text, strip=False, **kwargs)


def _choice(label: str, choices: list[tuple[str, str]]) -> forms.CharField:
    return _text(label, widget=forms.Select(choices=choices))


class PolicyEditForm(forms.Form):
    """One proposed edit of a tenant's policy, field by field (shape only)."""

    kind = _choice("What", KINDS)
    op = _choice("Edit", OPS)
    name = _text("Rule name", "Lower-case letters, digits, '_' or '-'.")
    tool = _text("Tool", "A tool name, or * for any tool.")
    match = _text(
        "Arguments",
        'The argument values a call must have, as JSON, e.g. {"action": "escalate"}.',
        widget=forms.Textarea(attrs={"rows": 2, "cols": 40}),
    )
    label = _text("After label", "The label a run holds (read data carrying it), e.g. pii.")
    other_label = _text("Other label", "Never held together with the first, e.g. finance.")
    sink = _text("Sink", "The sink kind refused once the label is held, e.g. external; * any.")
    effect = _choice("Effect", RULE_EFFECTS)
    description = _text("Description", widget=forms.Textarea(attrs={"rows": 2, "cols": 40}))
    enabled = forms.BooleanField(label="Enabled", required=False, initial=True)
    subject = _text("Subject", "A user (bob), or a role (role:member).")
    scope = _text("Scope", "object:action, e.g. ticket:write.")
    acl_effect = _choice("Effect", ACL_EFFECTS)
    user = _text("User", "The end user, e.g. dave.")
    role = _text("Role", "The role's name, e.g. member.")
    limit = forms.IntegerField(
        label="Runs examined", min_value=1, max_value=200, initial=20, required=False
    )


def change_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The change (as ``POST /api/v1/policies/what-if`` takes one) that a form's cleaned
    ``data`` describes. Nothing is checked here: an argument text that is not JSON is handed
    on as text, for the API's serializer to refuse."""
    kind, op = data.get("kind") or "call", data.get("op") or "add"
    if kind == "permission":
        body = {"subject": data["subject"], "scope": data["scope"], "effect": data["acl_effect"]}
        return {"op": op, "permission": body}
    if kind == "role":
        return {"op": op, "role": {"user": data["user"], "role": data["role"]}}
    if op == "remove":
        return {"op": op, "rule": {"name": data["name"]}}
    rule: dict[str, Any] = {"name": data["name"], "kind": kind}
    for field in FIELDS_OF[kind][1:]:
        rule[field] = _parse_match(data[field]) if field == "match" else data[field]
    return {"op": op, "rule": rule}


def form_data_of(change: Mapping[str, Any]) -> dict[str, Any]:
    """The form's fields for a change: ``change_of`` read backwards, so that a saved rule or
    line opens in the editor as it was written."""
    op = change["op"]
    if "permission" in change:
        body = change["permission"]
        return {"kind": "permission", "op": op, "subject": body["subject"]} | {
            "scope": body["scope"],
            "acl_effect": body["effect"],
        }
    if "role" in change:
        return {"kind": "role", "op": op, "user": change["role"]["user"]} | {
            "role": change["role"]["role"]
        }
    rule = change["rule"]
    if op == "remove":
        return {"kind": rule.get("kind", "call"), "op": op, "name": rule["name"]}
    data = {"kind": rule["kind"], "op": op}
    for field in FIELDS_OF[rule["kind"]]:
        value = rule.get(field, "")
        data[field] = json.dumps(value, sort_keys=True) if field == "match" else value
    return data


def rule_change(rule: Any, op: str = "update") -> dict[str, Any]:
    """An edit of a stored rule (a ``RuleSpec``), to open it in the editor."""
    data = rule.to_dict()
    body = {"name": data["name"], "kind": data["kind"]}
    body |= {field: data[field] for field in FIELDS_OF[data["kind"]][1:]}
    return {"op": op, "rule": body}


def check_change(change: dict[str, Any], limit: int = 20) -> dict[str, str]:
    """The API's refusals of ``change`` (``WhatIfSerializer``, the what-if endpoint's body),
    keyed by the form field they concern (``__all__`` when none); empty when it is well
    formed. Reads nothing; writes nothing."""
    body = WhatIfSerializer(data={"changes": [change], "limit": limit})
    try:
        if body.is_valid():
            return {}
        return _field_errors(body.errors, change)
    except PolicyError as exc:  # the policy's own refusal of a field (400 invalid_rule)
        return {_form_field(exc.details, change): exc.message}
    except ApiValidationError as exc:
        return _field_errors(exc.detail, change)


def refusals_of(tenant: str, change: dict[str, Any], limit: int = 20) -> dict[str, str]:
    """Everything the API would refuse in ``change`` for ``tenant``: its shape (the what-if
    serializer), then its meaning (the policy services, applying it to an in-memory copy of
    the tenant's policy: a rule that exists already, a name not found, a match value that is
    an object…; and the rules API's refusal of an approval rule that could never fire).
    Keyed by form field; empty when it can be previewed and saved. Writes nothing."""
    errors = check_change(change, limit)
    if errors:
        return errors
    try:
        policy.policy_snapshot(tenant, [change])
        rule = change.get("rule") or {}
        if change["op"] == "add":
            refuse_rules_that_never_fire(rule)
        elif change["op"] == "update":  # as PATCH /policies/rules/{name} checks it
            stored = policy.get_rule(tenant, rule["name"]).to_dict()
            refuse_rules_that_never_fire(stored | rule)
    except PolicyError as exc:
        return refusal_of(exc, change)
    return {}


def refusal_of(exc: PolicyError, change: dict[str, Any]) -> dict[str, str]:
    """A service's refusal (a rule that exists, a default, a name not found…) as a field error."""
    return {_form_field(exc.details, change): exc.message}


def _parse_match(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _field_errors(detail: Any, change: dict[str, Any], field: str = "") -> dict[str, str]:
    """The leaves of a DRF error tree (nested dicts and lists) by the field that holds them."""
    if isinstance(detail, Mapping):
        errors: dict[str, str] = {}
        for key, value in detail.items():
            name = field if str(key).isdigit() or key in ("changes", "rule") else str(key)
            errors |= _field_errors(value, change, name)
        return errors
    if isinstance(detail, list) and detail and not isinstance(detail[0], str | Mapping):
        return _field_errors(detail[0], change, field)
    message = " ".join(str(item) for item in detail) if isinstance(detail, list) else str(detail)
    return {_form_field({"field": field}, change): message}


def _form_field(details: Mapping[str, Any], change: Mapping[str, Any]) -> str:
    """The form field an error's ``details`` name (``field``, or the one key it names)."""
    target = next((key for key in ("permission", "role", "rule") if key in change), "")
    candidates = [str(details.get("field") or "")] + [str(key) for key in details]
    for name in candidates:
        if name == "rule" and target == "rule":
            return "name"
        name = FORM_FIELD.get(f"{target}.{name}", name)
        if name in PolicyEditForm.base_fields and name not in ("kind", "limit"):
            return name
    return "__all__"


def holds_policy_admin(tenant: str, username: str) -> bool:
    """Whether the staff user, as themselves, holds ``policy:admin`` in the tenant's policy
    (what the policy API asks of the user it acts for)."""
    return policy.decide(tenant, username, policy.POLICY_ADMIN_SCOPE).allowed
