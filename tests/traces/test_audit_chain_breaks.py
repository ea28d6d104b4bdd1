"""verify_audit names the first break of a tenant's chains, for tampering that removes or
rewrites several rows at once, the chain head itself, or every audit row of many runs; and
``verify_chain`` reports how far it got. Chains are written with the services the engine
uses (``RunChain``, ``insert_records``, ``anchor_run``); tampering is raw SQL."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.traces.test_audit_chain import tamper, verify
from traces import chain as chain_module
from traces.chain import (
    RunChain,
    anchor_run,
    hash_of_link,
    insert_records,
    register_ended_runs,
    sign_link,
    signed_head,
    verify_chain,
)
from traces.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Span,
    SpanKind,
)
from traces.services import delete_expired_traces

pytestmark = pytest.mark.django_db


def write_run(number: int, records: int = 5, tenant: str = "acme", created_at=None) -> str:
    """A run of ``records`` records whose end is linked (final) into the tenant's chain."""
    request_id = f"{number:032x}"
    chain = RunChain(request_id, tenant, new=True)
    insert_records(
        [chain.link(f"{i:016x}", "tool_io", {"i": i}, created_at) for i in range(records)]
    )
    anchor_run(request_id, tenant, chain.head, final=True)
    return request_id


def record_id(request_id: str, sequence: int) -> int:
    return AuditRecord.objects.get(request_id=request_id, sequence=sequence).pk


def delete_records(request_id: str, *sequences: int) -> None:
    for sequence in sequences:
        tamper(
            "DELETE FROM traces_auditrecord WHERE request_id = %s AND sequence = %s",
            request_id,
            sequence,
        )


def delete_links(*sequences: int) -> None:
    for sequence in sequences:
        tamper("DELETE FROM traces_auditrunlink WHERE tenant = 'acme' AND sequence = %s", sequence)


def test_an_intact_chain_reports_what_it_verified():
    runs = [write_run(n, records=n + 1) for n in range(3)]

    report = verify_chain("acme", ended=set(runs))

    assert report.ok
    assert (report.checked, report.runs, report.links, report.starts_after, report.ends_at) == (
        1 + 2 + 3,
        3,
        3,
        0,
        3,
    )


@pytest.mark.parametrize(
    ("deleted", "named"),
    [
        (
            (2, 3, 4),
            "sequence 2 (record id {id_5}, run {run}): records 2 to 4 are missing (deleted)",
        ),
        (
            (4, 5, 6),
            "sequence 4 (run {run}): records 4 to 6 at the end of the run are missing (deleted); "
            "link 1 names them",
        ),
    ],
    ids=["inside", "at-the-end"],
)
def test_several_records_deleted_from_a_run_are_named_together(deleted, named):
    run = write_run(1, records=6)
    id_5 = record_id(run, 5)
    delete_records(run, *deleted)

    ok, output = verify("acme")

    assert not ok
    assert f"acme: BROKEN at {named.format(run=run, id_5=id_5)}\n" in output


def test_several_links_deleted_inside_the_tenants_chain_are_named_together():
    runs = [write_run(n) for n in range(5)]
    delete_links(2, 3)

    ok, output = verify("acme")

    assert not ok
    assert f"acme: BROKEN at link 2 (run {runs[3]}): links 2 to 3 are missing (deleted)\n" in (
        output
    )
    report = verify_chain("acme")
    assert (report.checked, report.ends_at, report.links, report.broken.level) == (
        0,
        1,
        1,
        "tenant",
    )


def test_several_links_deleted_at_the_end_of_the_chain_are_named_together():
    for n in range(4):
        write_run(n)
    delete_links(3, 4)

    ok, output = verify("acme")

    assert not ok
    assert (
        "acme: BROKEN at link 3: links 3 to 4 at the end of the chain are missing (deleted)\n"
        in (output)
    )
    report = verify_chain("acme")
    assert (report.checked, report.ends_at, report.links) == (0, 2, 2)


def test_a_deleted_chain_head_is_noticed():
    write_run(1)
    write_run(2)
    tamper("DELETE FROM traces_auditchainhead WHERE tenant = 'acme'")

    ok, output = verify("acme")

    assert not ok
    assert "acme: BROKEN at link 2: the chain has links but no head\n" in output


def test_a_last_link_rewritten_with_its_hash_recomputed_is_not_the_one_the_head_names():
    write_run(1)
    write_run(2)
    last = AuditRunLink.objects.get(tenant="acme", sequence=2)
    last.created_at += timedelta(seconds=1)
    tamper(
        "UPDATE traces_auditrunlink SET created_at = %s, hash = %s WHERE id = %s",
        connection.ops.adapt_datetimefield_value(last.created_at),
        hash_of_link(last),
        last.pk,
    )

    ok, output = verify("acme")

    assert not ok
    assert "acme: BROKEN at link 2: the chain's last link is not the one its head names\n" in (
        output
    )


def test_a_head_ahead_of_an_empty_chain_names_the_missing_link():
    write_run(1)
    delete_links(1)

    ok, output = verify("acme")

    assert not ok
    assert "acme: BROKEN at link 1: link 1 at the end of the chain are missing (deleted)\n" in (
        output
    )


def spans_without_audit(count: int, kind: str = SpanKind.MODEL_CALL, first: int = 1) -> list[str]:
    """``count`` runs that left one span of ``kind`` each and no audit record or link."""
    now = timezone.now()
    runs = [f"{n:032x}" for n in range(first, first + count)]
    for request_id in runs:
        Span.objects.create(
            request_id=request_id,
            tenant="acme",
            span_id=request_id[-16:],
            sequence=1,
            kind=kind,
            name=str(kind),
            started_at=now,
            ended_at=now,
            duration_ms=1.0,
        )
    return runs


def test_many_runs_whose_audit_is_gone_are_named_five_at_a_time():
    runs = spans_without_audit(7)
    spans_without_audit(1, SpanKind.TOOL_CALL, first=100)  # no model call: needs no audit

    ok, output = verify()

    assert not ok
    assert (
        f"acme: BROKEN at link 0 (run {runs[0]}): runs with model calls have no audit records "
        f"(the audit chain is missing): {', '.join(runs[:5])}, …\n"
    ) in output


def test_a_few_runs_whose_audit_is_gone_are_all_named():
    runs = spans_without_audit(5)

    report = verify_chain("acme")

    assert report.broken.reason.endswith(f"missing): {', '.join(runs)}")
    assert AuditChainHead.objects.filter(tenant="acme").count() == 0


# --- Exported heads, after retention and against a cut-back chain -------------------------------


def expect(tmp_path, head: dict) -> tuple[bool, str]:
    path = tmp_path / "heads.json"
    path.write_text(json.dumps([head]))
    return verify("acme", expect_head=path)


def test_a_head_whose_link_retention_deleted_is_vouched_for_by_the_checkpoint(tmp_path):
    long_ago = timezone.now() - timedelta(days=1000)
    write_run(1, created_at=long_ago)
    at_one = signed_head("acme")
    write_run(2, created_at=long_ago)
    at_two = signed_head("acme")
    write_run(3)

    delete_expired_traces(now=timezone.now())

    assert AuditCheckpoint.objects.get(tenant="acme").sequence == 2
    for head in (at_one, at_two):  # the checkpoint is past the first, at the second
        assert expect(tmp_path, head) == (
            True,
            "acme: ok, 5 records verified after checkpoint 2 (1 runs, 1 links), chain ends at "
            f"link 3\nacme: extends the expected head at link {head['sequence']}\n",
        )
    forged = {"tenant": "acme", "sequence": 2, "hash": "f" * 64}
    ok, output = expect(tmp_path, forged | {"signature": sign_link("head", "acme", 2, "f" * 64)})
    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: link 2 is not the expected head's (the chain was "
        "cut back and rewritten)\n"
    ) in output


def test_a_head_whose_link_was_deleted_without_retention_is_missing(tmp_path):
    write_run(1)
    head = signed_head("acme")
    write_run(2)
    write_run(3, tenant="globex")  # another tenant's link 1 is not acme's
    delete_links(1)

    ok, output = expect(tmp_path, head)

    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: link 1 of the expected head is missing (deleted)\n"
    ) in output


def test_the_genesis_head_is_extended_by_any_chain(tmp_path):
    genesis = signed_head("acme")
    write_run(1)

    assert expect(tmp_path, genesis)[1].endswith("acme: extends the expected head at link 0\n")


@pytest.mark.parametrize("missing", ["sequence", "hash", "signature"])
def test_an_expected_head_without_a_member_is_refused_saying_so(tmp_path, missing):
    write_run(1)
    head = {key: value for key, value in signed_head("acme").items() if key != missing}

    ok, output = expect(tmp_path, head)

    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: the expected head is not a {tenant, sequence, "
        "hash, signature} object\n"
    ) in output


def test_an_expected_head_with_a_sequence_that_is_no_number_is_refused(tmp_path):
    write_run(1)

    ok, output = expect(tmp_path, signed_head("acme") | {"sequence": "one"})

    assert not ok
    assert "the expected head is not a {tenant, sequence, hash, signature} object" in output


# --- Which runs have ended: the registered sources ---------------------------------------------


def test_a_registered_source_says_which_runs_have_ended_and_is_asked_once(monkeypatch):
    monkeypatch.setattr(chain_module, "_ended_run_sources", [])  # only this test's source
    paused = f"{1:032x}"
    chain = RunChain(paused, "acme", new=True)
    insert_records([chain.link("0" * 16, "tool_io", {"i": 1})])
    anchor_run(paused, "acme", chain.head)  # a pause: the link is not final
    asked = []

    def ended(tenant: str) -> list[str]:
        asked.append(tenant)
        return [paused]

    assert verify_chain("acme").ok  # no source: not told apart from a run still going
    register_ended_runs(ended)
    register_ended_runs(ended)  # idempotent

    report = verify_chain("acme")

    assert asked == ["acme"]
    assert report.broken.reason == f"run {paused} has ended but its last link is not final"


def test_a_chain_deleted_whole_no_longer_extends_its_exported_head(tmp_path):
    run = write_run(1)
    head = signed_head("acme")
    for table in ("traces_auditrecord", "traces_auditrunlink", "traces_auditchainhead"):
        tamper(f"DELETE FROM {table} WHERE tenant = 'acme'")  # noqa: S608 (our table names)

    ok, output = expect(tmp_path, head)

    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: the chain was cut back: the expected head is at "
        "link 1, the chain now ends at link 0\n"
    ) in output
    assert not AuditRecord.objects.filter(request_id=run).exists()


def test_an_expected_head_signed_by_another_deployment_is_refused(tmp_path):
    write_run(1)
    head = signed_head("acme")
    other = sign_link("head", "acme", head["sequence"], head["hash"], key=b"another deployment")

    ok, output = expect(tmp_path, head | {"signature": other})

    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: the expected head's signature does not match (not "
        "exported by this deployment)\n"
    ) in output
