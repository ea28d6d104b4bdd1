"""Runs that carry every kind of personal data, through the API with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.factories import write_agent, write_script
from tests.traces import pii

LOOKUP_PAYMENT = {
    "name": "lookup_payment",
    "description": "Look up the payment details on file for a refund, by card holder.",
    "parameters": {
        "type": "object",
        "properties": {
            "holder": {"type": "string"},
            "national_id": {"type": "string"},
            "note": {"type": "string"},
        },
        "required": ["holder"],
        "additionalProperties": False,
    },
    "handler": "tests.traces.payment_tool.lookup_payment",
    "access": ["ticket:read"],
    "idempotent": True,
    "concurrency_safe": True,
    "sensitive": {
        "arguments": {"/holder": "name", "/national_id": "national_id"},
        "result": {"/holder": "name", "/national_id": "national_id", "/card": "card"},
    },
}

PII_INPUT = (
    # No name here: names are masked where a tool file declares them (and wherever the same
    # value reappears in the run); free-text names before that are not detected (no NER).
    f"I handle customer C-1001's case: his phone is {pii.PHONE_CN_SPACED}, resident ID "
    f"{pii.NATIONAL_ID}. Refund order ORD-55213 (ticket T-20250318-007, invoice INV-2025-0318) "
    f"to card {pii.CARD}. The bank API wants '{pii.BEARER}' and {pii.PASSWORD}. "
    f"In New York call {pii.PHONE_US} or {pii.PHONE_US_DASHED}; Berlin office {pii.PHONE_DE}, "
    f"Tokyo {pii.PHONE_JP}. SSN {pii.SSN}, NI number {pii.NINO}, DNI {pii.DNI}, "
    f"NIE {pii.NIE}, Aadhaar {pii.AADHAAR}, CPF {pii.CPF}. Parcels "
    f"{' and '.join(pii.LOOKALIKES[:2])}, shipped {pii.LOOKALIKES[2]} from {pii.LOOKALIKES[3]}."
)

PII_SCRIPT = [
    {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}]},
    {
        "tool_calls": [
            {
                "name": "lookup_payment",
                "arguments": {
                    "holder": pii.NAME_ZH,
                    "national_id": pii.NATIONAL_ID,
                    "note": f"or call {pii.PHONE_INTL}; my key is {pii.API_KEY}",
                },
            }
        ]
    },
    {
        "tool_calls": [
            {
                "name": "notify_user",
                "arguments": {
                    "user_id": "agent-li",
                    "ticket_id": "T-20250318-007",
                    "message": f"Call {pii.NAME} on {pii.PHONE_CN} or mail {pii.EMAIL} "
                    "about ORD-55213.",
                },
            }
        ]
    },
    {
        "text": f"{pii.NAME} ({pii.PHONE_CN}, {pii.EMAIL}) will be refunded for ORD-55213 on "
        f"ticket T-20250318-007 to IBAN {pii.IBAN}; agent-li was notified. "
        f"Second account {pii.IBAN_GB}, US line {pii.PHONE_US}, parcel {pii.LOOKALIKES[0]}."
    },
]


@pytest.fixture
def tool_dir(tmp_path: Path, settings: Any) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "lookup_payment.json").write_text(json.dumps(LOOKUP_PAYMENT), encoding="utf-8")
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, folder]
    return folder


@pytest.fixture
def pii_agent(agent_dir: Path, tool_dir: Path, tmp_path: Path) -> dict[str, Any]:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    script = write_script(scripts, PII_SCRIPT)
    return write_agent(
        agent_dir,
        model=f"scripted:{script}",
        tools=["get_customer", "lookup_payment", "notify_user", "get_ticket"],
    )


def start_pii_run(client: Any, agent: dict[str, Any], user: str = "alice") -> Any:
    return client.post("/api/v1/runs", {"agent": agent["name"], "user": user, "input": PII_INPUT})


@pytest.fixture(autouse=True)
def _tenant_patterns_read_afresh():
    """Tenants' custom patterns are cached per process; each test starts from its database."""
    from traces.masking import plugins

    plugins._TENANT_CACHE.clear()
    yield
    plugins._TENANT_CACHE.clear()
