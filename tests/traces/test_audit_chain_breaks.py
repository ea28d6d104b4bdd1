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

from tests.security.test_audit_final_links import rehash_from, triggers_bypassed
from tests.traces.test_audit_chain import tamper, verify
from traces import chain as chain_module
from traces.chain import (
    GENESIS_HASH,
    ChainBreak,
    ChainReport,
    RunChain,
    anchor_run,
    finalize_run,
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


def test_runs_that_made_no_model_call_need_no_audit():
    spans_without_audit(2, SpanKind.TOOL_CALL)

    assert verify_chain("acme") == ChainReport("acme", 0, 0, 0, None, 0, 0)


def test_a_tenant_left_with_only_its_checkpoint_is_verified_with_the_others():
    long_ago = timezone.now() - timedelta(days=1000)
    write_run(1, created_at=long_ago)
    write_run(2, created_at=long_ago, tenant="globex")
    delete_expired_traces(now=timezone.now())
    tamper("DELETE FROM traces_auditchainhead WHERE tenant = 'acme'")  # all but the checkpoint

    ok, output = verify()

    assert not ok
    assert "acme: BROKEN at link 1: the chain has links but no head\n" in output
    assert "globex: ok, 0 records verified after checkpoint 1" in output


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


# --- Whole reports: each kind of break, written and verified without a run --------------------


def expired_prefix() -> list[str]:
    """Runs 1 and 2 expired and deleted by retention (its checkpoint at link 2); runs 3, 4 and
    5 (3, 4 and 5 records) kept."""
    long_ago = timezone.now() - timedelta(days=1000)
    for n in (1, 2):
        write_run(n, records=2, created_at=long_ago)
    kept = [write_run(n, records=n) for n in (3, 4, 5)]
    delete_expired_traces(now=timezone.now())
    assert AuditCheckpoint.objects.get(tenant="acme").sequence == 2
    return kept


def test_a_chain_verified_after_a_checkpoint_reports_where_it_started_and_ended():
    kept = expired_prefix()

    assert verify_chain("acme", ended=set(kept)) == ChainReport("acme", 12, 2, 5, None, 3, 3)


def test_a_forged_checkpoint_stops_verification_where_it_claims_to_be():
    expired_prefix()
    tamper("UPDATE traces_auditcheckpoint SET hash = %s WHERE tenant = 'acme'", "f" * 64)

    assert verify_chain("acme") == ChainReport(
        "acme",
        0,
        2,
        2,
        ChainBreak(2, "the retention checkpoint's signature does not match", level="tenant"),
    )


def test_a_link_edited_after_a_checkpoint_is_named_with_the_links_verified_before_it():
    kept = expired_prefix()
    tamper("UPDATE traces_auditrunlink SET run_hash = %s WHERE sequence = 4", "f" * 64)

    assert verify_chain("acme") == ChainReport(
        "acme",
        0,
        2,
        3,
        ChainBreak(
            4, "its content does not match its hash (edited)", request_id=kept[1], level="tenant"
        ),
        links=1,
    )


def test_a_head_deleted_after_a_checkpoint_is_named_with_every_link_verified():
    expired_prefix()
    tamper("DELETE FROM traces_auditchainhead WHERE tenant = 'acme'")

    assert verify_chain("acme") == ChainReport(
        "acme", 0, 2, 5, ChainBreak(5, "the chain has links but no head", level="tenant"), links=3
    )


def test_a_head_with_a_forged_signature_is_named_at_its_sequence():
    write_run(1)
    write_run(2)
    tamper("UPDATE traces_auditchainhead SET signature = %s WHERE tenant = 'acme'", "0" * 64)

    assert verify_chain("acme") == ChainReport(
        "acme",
        0,
        0,
        2,
        ChainBreak(2, "the chain head's signature does not match", level="tenant"),
        links=2,
    )


def test_of_several_runs_deleted_whole_the_first_linked_is_named():
    first, second, third = (write_run(n, records=3) for n in (1, 2, 3))
    tamper("DELETE FROM traces_auditrecord WHERE request_id IN (%s, %s)", third, second)

    assert verify_chain("acme") == ChainReport(
        "acme",
        3,
        0,
        3,
        ChainBreak(
            2,
            f"run {second} has no audit records left: the whole run was deleted",
            request_id=second,
            level="tenant",
        ),
        3,
        1,
    )
    assert AuditRecord.objects.filter(request_id=first).count() == 3


def test_a_record_appended_after_a_final_link_is_named_with_the_link_it_follows():
    run = write_run(1, records=3)
    forged = RunChain(run, "acme").link("f" * 16, "tool_io", {"forged": True})
    with triggers_bypassed():
        insert_records([forged])

    assert verify_chain("acme", ended={run}) == ChainReport(
        "acme",
        3,
        0,
        1,
        ChainBreak(
            4,
            "it was appended after the run's final link (link 1, at record 3): the run had ended",
            record_id=AuditRecord.objects.get(request_id=run, sequence=4).pk,
            request_id=run,
        ),
        1,
        1,
    )


def test_a_run_rewritten_whole_is_named_by_the_link_to_its_last_record():
    run = write_run(1, records=3)
    rehash_from(run, 2, {"rewritten": True})

    assert verify_chain("acme") == ChainReport(
        "acme",
        2,
        0,
        1,
        ChainBreak(
            1,
            f"it names record 3 of run {run} with another hash (the run was rewritten)",
            request_id=run,
            level="tenant",
        ),
        1,
        1,
    )


def unlinked_run(number: int, records: int) -> tuple[str, RunChain]:
    request_id = f"{number:032x}"
    chain = RunChain(request_id, "acme", new=True)
    insert_records([chain.link(f"{i:016x}", "tool_io", {"i": i}) for i in range(records)])
    return request_id, chain


def test_a_run_still_going_verifies_unlinked_without_a_head():
    run, _ = unlinked_run(1, 3)

    for ended in (None, set(), {"another run"}):
        assert verify_chain("acme", ended=ended) == ChainReport("acme", 3, 0, 0, None, 0, 1)
    assert not AuditChainHead.objects.exists()
    assert not verify_chain("acme", ended={run}).ok


def test_an_ended_run_never_linked_is_named_from_its_first_record():
    run, _ = unlinked_run(1, 3)

    assert verify_chain("acme", ended={run}).broken == ChainBreak(
        1,
        "the run has ended but records 1 to 3 are not linked into the tenant's chain (appended "
        "after its end, or its end was never linked: no final link)",
        request_id=run,
    )


def test_an_ended_run_with_one_record_after_its_last_link_names_that_record():
    run, chain = unlinked_run(1, 3)
    anchor_run(run, "acme", chain.head)  # a pause
    insert_records([chain.link("f" * 16, "tool_io", {"after": "the pause"})])

    assert verify_chain("acme", ended={run}).broken == ChainBreak(
        4,
        "the run has ended but record 4 are not linked into the tenant's chain (appended after "
        "its end, or its end was never linked: no final link)",
        request_id=run,
    )


def test_an_ended_runs_last_link_must_be_final_from_the_heads_final_links_from_on():
    ended = write_run(1)
    paused, chain = unlinked_run(2, 2)
    anchor_run(paused, "acme", chain.head)  # link 2, not final: then the run ended
    not_final = ChainBreak(
        2,
        f"run {paused} has ended but its last link is not final",
        request_id=paused,
        level="tenant",
    )

    assert verify_chain("acme", ended={ended, paused}).broken == not_final  # from link 1 on
    AuditChainHead.objects.filter(tenant="acme").update(final_links_from=2)
    assert verify_chain("acme", ended={ended, paused}).broken == not_final
    AuditChainHead.objects.filter(tenant="acme").update(final_links_from=3)
    assert verify_chain("acme", ended={ended, paused}).ok  # written before final links existed


def test_a_run_paused_then_ended_at_the_same_record_is_closed_by_its_final_link():
    run, chain = unlinked_run(1, 3)
    anchor_run(run, "acme", chain.head)
    anchor_run(run, "acme", chain.head, final=True)

    pause, final = AuditRunLink.objects.filter(tenant="acme").order_by("sequence")
    assert (pause.run_sequence, pause.final, final.run_sequence, final.final) == (3, False, 3, True)
    assert verify_chain("acme", ended={run}) == ChainReport("acme", 3, 0, 2, None, 2, 1)


def test_anchoring_appends_one_link_per_head_and_moves_the_signed_head():
    run, chain = unlinked_run(1, 3)
    anchor_run(run, "acme", (0, GENESIS_HASH))  # nothing to link: not even a head
    assert not AuditChainHead.objects.exists()

    anchor_run(run, "acme", chain.head)
    anchor_run(run, "acme", chain.head)  # linked already

    [link] = AuditRunLink.objects.filter(tenant="acme")
    assert (link.sequence, link.request_id, link.run_sequence, link.run_hash) == (
        1,
        run,
        3,
        chain.head[1],
    )
    assert (link.prev_hash, link.final, link.hash) == (GENESIS_HASH, False, hash_of_link(link))
    head = AuditChainHead.objects.get(tenant="acme")
    assert (head.sequence, head.hash, head.signature) == (
        1,
        link.hash,
        sign_link("head", "acme", 1, link.hash),
    )

    finalize_run(run, "acme")  # the run ended without its driver: its last record, final
    finalize_run(run, "acme")

    final = AuditRunLink.objects.get(tenant="acme", sequence=2)
    assert (final.run_sequence, final.run_hash, final.prev_hash, final.final) == (
        3,
        chain.head[1],
        link.hash,
        True,
    )
    assert AuditChainHead.objects.get(tenant="acme").sequence == 2
    assert verify_chain("acme", ended={run}).ok


def test_an_ended_run_before_others_must_end_in_a_final_link_too():
    paused, chain = unlinked_run(1, 2)
    anchor_run(paused, "acme", chain.head)  # link 1, not final: then the run ended
    ended = write_run(2)

    assert verify_chain("acme", ended={paused, ended}).broken == ChainBreak(
        1,
        f"run {paused} has ended but its last link is not final",
        request_id=paused,
        level="tenant",
    )


def test_of_runs_deleted_whole_the_first_linked_is_named_whatever_their_ids():
    later_id, earlier_id = write_run(5), write_run(3)  # links 1 and 2
    tamper("DELETE FROM traces_auditrecord WHERE tenant = 'acme'")

    assert verify_chain("acme").broken.request_id == later_id != earlier_id


def test_records_deleted_past_two_links_of_a_run_are_named_from_the_first_link_beyond():
    # A pause at record 2 and the end at record 4; records 2 to 4 deleted: both links name
    # records that are gone, and the break names the first of them.
    run, chain = unlinked_run(1, 2)
    anchor_run(run, "acme", chain.head)  # link 1: a pause at record 2
    insert_records([chain.link(f"{i:016x}", "tool_io", {"i": i}) for i in range(2, 4)])
    anchor_run(run, "acme", chain.head, final=True)  # link 2: the end at record 4
    delete_records(run, 2, 3, 4)

    assert verify_chain("acme", ended={run}).broken == ChainBreak(
        2,
        "record 2 at the end of the run are missing (deleted); link 1 names them",
        request_id=run,
    )
