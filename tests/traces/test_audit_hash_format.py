"""The audit hashes are a format, not an implementation detail: an auditor recomputes them
from docs/audit-and-masking.md's description (SHA-256 over the canonical JSON — sorted keys,
no whitespace, UTF-8 — of the record's or link's content; the head signed with HMAC-SHA256),
and a chain written by an earlier release must still verify. A change of the format that writes
and verifies alike would pass every self-consistency test: these compute each hash
independently of traces.chain."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from django.conf import settings

from traces.chain import (
    GENESIS_HASH,
    RunChain,
    anchor_run,
    insert_records,
    link_hash,
    signed_head,
)
from traces.errors import AuditRecordImmutable
from traces.models import AuditChainHead, AuditRecord, AuditRunLink

pytestmark = pytest.mark.django_db

RUN = "a" * 32
# Unsorted keys, nested, non-ASCII, a quote: each a way a canonical form differs from another.
PAYLOAD = {"zeta": 1, "alpha": {"name": 'Zoë "Z"', "list": [2.5, None, True]}, "é": "ü"}
AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


def sha256_of_canonical(content) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def expected_signature(role: str, tenant: str, sequence: int, link_hash: str) -> str:
    message = json.dumps(
        [role, tenant, sequence, link_hash],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode("utf-8")
    key = settings.HARNESS_AUDIT_CHECKPOINT_KEY.encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def test_a_records_hash_is_sha256_of_the_canonical_json_of_its_content():
    chain = RunChain(RUN, "acme", new=True)
    first = chain.link("0123456789abcdef", "tool_io", PAYLOAD, created_at=AT)
    second = chain.link("fedcba9876543210", "model_request", {"n": 2}, created_at=AT)
    insert_records([first, second])

    stored = AuditRecord.objects.get(request_id=RUN, sequence=1)
    assert stored.hash == sha256_of_canonical(
        {
            "tenant": "acme",
            "sequence": 1,
            "prev_hash": GENESIS_HASH,
            "request_id": RUN,
            "span_id": "0123456789abcdef",
            "kind": "tool_io",
            "payload": PAYLOAD,
            "created_at": "2026-03-04T05:06:07.890123+00:00",
        }
    )
    assert AuditRecord.objects.get(request_id=RUN, sequence=2).hash == sha256_of_canonical(
        {
            "tenant": "acme",
            "sequence": 2,
            "prev_hash": stored.hash,
            "request_id": RUN,
            "span_id": "fedcba9876543210",
            "kind": "model_request",
            "payload": {"n": 2},
            "created_at": "2026-03-04T05:06:07.890123+00:00",
        }
    )


@pytest.mark.parametrize("final", [False, True], ids=["pause", "end"])
def test_a_links_hash_covers_its_content_and_final_only_when_set(final):
    chain = RunChain(RUN, "acme", new=True)
    insert_records([chain.link("0" * 16, "tool_io", {"n": 1}, created_at=AT)])

    anchor_run(RUN, "acme", chain.head, final=final)

    link = AuditRunLink.objects.get(request_id=RUN)
    content = {
        "link": True,
        "tenant": "acme",
        "sequence": 1,
        "prev_hash": GENESIS_HASH,
        "request_id": RUN,
        "run_sequence": 1,
        "run_hash": chain.head[1],
        "created_at": link.created_at.isoformat(),
    }
    if final:
        content["final"] = True
    assert (link.final, link.hash) == (final, sha256_of_canonical(content))
    head = AuditChainHead.objects.get(tenant="acme")
    assert (head.sequence, head.hash) == (1, link.hash)
    assert head.signature == expected_signature("head", "acme", 1, link.hash)
    assert signed_head("acme") == {
        "tenant": "acme",
        "sequence": 1,
        "hash": link.hash,
        "signature": head.signature,
    }


def test_a_link_hashed_without_saying_final_is_hashed_as_a_link_written_before_the_flag():
    # Migration 0004 hashed the links written before final links existed this way: their
    # content has no "final" member, whatever else is asked.
    content = {
        "tenant": "acme",
        "sequence": 3,
        "prev_hash": "a" * 64,
        "request_id": RUN,
        "run_sequence": 7,
        "run_hash": "b" * 64,
        "created_at": AT,
    }

    expected = sha256_of_canonical({"link": True, **content, "created_at": AT.isoformat()})
    assert link_hash(**content) == expected == link_hash(**content, final=False)


def test_the_exported_head_of_a_tenant_without_a_chain_is_the_signed_genesis():
    assert signed_head("nobody") == {
        "tenant": "nobody",
        "sequence": 0,
        "hash": GENESIS_HASH,
        "signature": expected_signature("head", "nobody", 0, GENESIS_HASH),
    }


def test_a_record_is_inserted_once_only():
    chain = RunChain(RUN, "acme", new=True)
    record = chain.link("0" * 16, "tool_io", {"n": 1})
    insert_records([record])

    with pytest.raises(AuditRecordImmutable):
        insert_records([record])
    insert_records([])

    assert AuditRecord.objects.filter(request_id=RUN).count() == 1


def test_a_forgotten_head_is_read_again_from_what_was_stored():
    chain = RunChain(RUN, "acme", new=True)
    kept = chain.link("0" * 16, "tool_io", {"n": 1})
    insert_records([kept])
    chain.link("0" * 16, "tool_io", {"n": 2})  # its transaction rolled back: never stored

    chain.forget()
    again = chain.link("0" * 16, "tool_io", {"n": 2})

    assert (again.sequence, again.prev_hash) == (2, kept.hash)
    assert RunChain(RUN, "acme").head == (1, kept.hash)
    assert RunChain("b" * 32, "acme").head == (0, GENESIS_HASH)
