"""Audit records are append-only and chained on two levels — each run's records, and per
tenant a chain of run links — and verify_audit names the first broken record or link.
Tampering is done the way an attacker with database access would: raw SQL (on PostgreSQL as a
superuser who bypasses the append-only triggers)."""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, connections, transaction
from django.test import Client
from django.utils import timezone

from tests.support.audit import demo_run, paused_run, record, still_going, tamper, verify
from traces.chain import (
    GENESIS_HASH,
    RunChain,
    anchor_run,
    append_audit_record,
    hash_of,
    insert_records,
    normalize_json,
    sign_link,
    to_json_value,
    verify_chain,
)
from traces.errors import AuditRecordImmutable, NonFiniteNumber
from traces.models import AuditChainHead, AuditRecord, AuditRunLink

on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="the triggers exist on PostgreSQL only"
)


def last_record(request_id: str) -> AuditRecord:
    return AuditRecord.objects.filter(request_id=request_id).order_by("-sequence").first()


# --- The two levels -------------------------------------------------------------------------


def test_runs_are_chains_linked_into_their_tenants_chain(acme, globex):
    first, second = demo_run(acme), demo_run(acme)
    demo_run(globex)

    ok, output = verify()

    assert ok
    count = AuditRecord.objects.filter(tenant="acme").count()
    assert f"acme: ok, {count} records verified from genesis (2 runs, 2 links)" in output
    assert "chain ends at link 2" in output
    assert "globex: ok" in output
    for run in (first, second):
        records = list(AuditRecord.objects.filter(request_id=run).order_by("id"))
        assert [r.sequence for r in records] == list(range(1, len(records) + 1))
        assert records[0].prev_hash == GENESIS_HASH
        assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    one, two = AuditRunLink.objects.filter(tenant="acme").order_by("sequence")
    assert (one.sequence, one.request_id, one.run_hash) == (1, first, last_record(first).hash)
    assert (two.request_id, two.run_sequence) == (second, last_record(second).sequence)
    assert (one.prev_hash, two.prev_hash) == (GENESIS_HASH, one.hash)
    head = AuditChainHead.objects.get(tenant="acme")
    assert (head.sequence, head.hash) == (2, two.hash)
    assert head.signature == sign_link("head", "acme", 2, two.hash)


def test_a_run_still_going_verifies_without_a_link(acme, monkeypatch):
    # As if its driver died before the run ended: the engine never linked it.
    monkeypatch.setattr("harness.engine.driver.anchor_run", lambda *args, **kwargs: None)
    run = demo_run(acme, end=False)
    still_going(run, "running")

    ok, output = verify("acme")

    assert ok
    assert "(1 runs, 0 links), chain ends at link 0" in output
    assert not AuditRunLink.objects.filter(request_id=run).exists()


def test_anchoring_is_idempotent_and_a_resumed_run_is_linked_again(acme, monkeypatch):
    run = paused_run(acme, monkeypatch)
    tenant_head = AuditChainHead.objects.get(tenant="acme").hash
    anchor_run(run, "acme", RunChain(run, "acme").head)  # already linked: nothing
    anchor_run(run, "acme", (0, GENESIS_HASH))  # nothing to link
    assert AuditChainHead.objects.get(tenant="acme").hash == tenant_head
    assert AuditRunLink.objects.filter(request_id=run).count() == 1

    chain = RunChain(run, "acme")  # the run resumes: a new driver continues its chain
    append = chain.link("0" * 16, "tool_io", {"resumed": True})
    insert_records([append])
    anchor_run(run, "acme", chain.head, final=True)  # and ends

    assert append.sequence == last_record(run).sequence
    assert AuditRunLink.objects.filter(request_id=run).count() == 2
    assert verify_chain("acme").ok


def test_a_run_chain_numbers_records_in_memory_after_one_read(
    acme, django_assert_num_queries, monkeypatch
):
    run = paused_run(acme, monkeypatch)
    before = last_record(run)
    chain = RunChain(run, "acme")

    with transaction.atomic():  # a step's transaction, as the engine's
        with django_assert_num_queries(1):
            made = [chain.link(f"{i:016x}", "tool_io", {"i": i}) for i in range(3)]
        with django_assert_num_queries(1):
            insert_records(made)

    assert [r.sequence for r in made] == [
        before.sequence + 1,
        before.sequence + 2,
        before.sequence + 3,
    ]
    assert made[0].prev_hash == before.hash
    assert chain.head == (made[-1].sequence, made[-1].hash)
    assert verify_chain("acme").ok


# --- Tampering, named -------------------------------------------------------------------------


def test_an_edited_record_is_named(acme):
    run = demo_run(acme)
    target = record(run, 3)
    tamper(
        "UPDATE traces_auditrecord SET payload = %s WHERE id = %s",
        '{"tool": "update_ticket", "result": {"status": "resolved"}}',
        target.id,
    )

    ok, output = verify("acme")

    assert not ok
    assert f"acme: BROKEN at sequence 3 (record id {target.id}, run {run})" in output
    assert "its content does not match its hash (edited)" in output


def test_an_edited_record_with_a_recomputed_hash_breaks_the_next_link(acme):
    run = demo_run(acme)
    target = record(run, 3)
    target.payload = {"tool": "update_ticket", "result": {"status": "resolved"}}
    forged = hash_of(target)
    tamper(
        "UPDATE traces_auditrecord SET payload = %s, hash = %s WHERE id = %s",
        json.dumps(target.payload),
        forged,
        target.id,
    )
    following = record(run, 4)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at sequence 4 (record id {following.id}, run {run})" in output
    assert "the one before was changed" in output


def test_a_whole_run_rewritten_with_recomputed_hashes_breaks_its_link(acme):
    run = demo_run(acme)
    prev_hash = GENESIS_HASH
    for row in AuditRecord.objects.filter(request_id=run).order_by("sequence"):
        if row.sequence == 2:
            row.payload = {"rewritten": True}
        row.prev_hash = prev_hash
        row.hash = hash_of(row)
        tamper(
            "UPDATE traces_auditrecord SET payload = %s, prev_hash = %s, hash = %s WHERE id = %s",
            json.dumps(row.payload),
            row.prev_hash,
            row.hash,
            row.id,
        )
        prev_hash = row.hash

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at link 1 (run {run}): it names record" in output
    assert "with another hash (the run was rewritten)" in output


def test_a_deleted_record_is_named(acme):
    run = demo_run(acme)
    following = record(run, 5)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s AND sequence = 4", run)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at sequence 4 (record id {following.id}, run {run})" in output
    assert "record 4 is missing (deleted)" in output


def test_deleted_records_at_the_end_of_a_linked_run_are_noticed(acme):
    run = demo_run(acme)
    last = last_record(run)
    tamper("DELETE FROM traces_auditrecord WHERE id = %s", last.id)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at sequence {last.sequence} (run {run})" in output
    assert f"record {last.sequence} at the end of the run are missing (deleted); link 1" in output


def test_a_deleted_run_is_named_by_its_link(acme):
    kept, deleted = demo_run(acme), demo_run(acme)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", deleted)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at link 2 (run {deleted})" in output
    assert "has no audit records left: the whole run was deleted" in output
    assert AuditRecord.objects.filter(request_id=kept).exists()


def test_a_deleted_run_and_its_link_are_noticed(acme):
    demo_run(acme)
    middle = demo_run(acme)
    demo_run(acme)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", middle)
    tamper("DELETE FROM traces_auditrunlink WHERE request_id = %s", middle)

    ok, output = verify("acme")

    assert not ok
    assert "BROKEN at link 2" in output
    assert "link 2 is missing (deleted)" in output


def test_a_deleted_last_link_is_noticed(acme):
    demo_run(acme)
    last = demo_run(acme)
    tamper("DELETE FROM traces_auditrunlink WHERE request_id = %s", last)

    ok, output = verify("acme")

    assert not ok
    assert "link 2 at the end of the chain are missing (deleted)" in output


def test_a_forged_chain_head_is_noticed(acme):
    demo_run(acme)
    last = demo_run(acme)
    tamper("DELETE FROM traces_auditrunlink WHERE request_id = %s", last)
    first_link = AuditRunLink.objects.get(tenant="acme", sequence=1)
    tamper(
        "UPDATE traces_auditchainhead SET sequence = 1, hash = %s WHERE tenant = 'acme'",
        first_link.hash,
    )

    ok, output = verify("acme")

    assert not ok
    assert "the chain head's signature does not match" in output


def test_reordered_records_are_named(acme):
    run = demo_run(acme)
    swap = "UPDATE traces_auditrecord SET sequence = %s WHERE request_id = %s AND sequence = %s"
    tamper(swap, 1000, run, 2)
    tamper(swap, 2, run, 3)
    tamper(swap, 3, run, 1000)

    ok, output = verify("acme")

    assert not ok
    assert f"BROKEN at sequence 2 (record id {record(run, 2).id}, run {run})" in output
    assert "does not link to the record before it" in output


def test_a_broken_chain_of_one_tenant_leaves_the_others_verified(acme, globex):
    run = demo_run(acme)
    demo_run(globex)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s AND sequence = 2", run)

    ok, output = verify()

    assert not ok
    assert "acme: BROKEN at sequence 2" in output
    assert "globex: ok" in output
    assert "audit chain broken for acme" in output


def test_a_tenant_whose_chain_is_missing_while_it_has_runs_is_reported(acme):
    run = demo_run(acme)
    for table in ("traces_auditrecord", "traces_auditrunlink", "traces_auditchainhead"):
        tamper(f"DELETE FROM {table} WHERE tenant = 'acme'")  # noqa: S608 (our table names)

    ok, output = verify()

    assert not ok
    assert "acme: BROKEN at link 0 (run " in output
    assert f"runs with model calls have no audit records (the audit chain is missing): {run}" in (
        output
    )


# --- Exported heads: a chain cut back to an earlier signed head --------------------------------


def audit_head(*tenants: str) -> str:
    out = StringIO()
    call_command("audit_head", *[a for t in tenants for a in ("--tenant", t)], stdout=out)
    return out.getvalue()


def test_audit_head_prints_the_signed_heads_as_json(acme, globex):
    demo_run(acme)
    demo_run(globex)

    heads = json.loads(audit_head())
    [acme_head] = json.loads(audit_head("acme"))

    head = AuditChainHead.objects.get(tenant="acme")
    assert acme_head == {
        "tenant": "acme",
        "sequence": 1,
        "hash": head.hash,
        "signature": head.signature,
    }
    assert [h["tenant"] for h in heads] == ["acme", "globex"]


def test_a_chain_cut_back_to_an_earlier_signed_head_fails_the_expected_head(acme, tmp_path):
    demo_run(acme)
    earlier = AuditChainHead.objects.get(tenant="acme")
    last = demo_run(acme)
    exported = tmp_path / "heads.json"
    exported.write_text(audit_head("acme"))
    assert verify("acme", expect_head=exported) == (
        True,
        verify("acme")[1] + "acme: extends the expected head at link 2\n",
    )
    # Cut back: the last run (spans too) and its link go, the earlier signed head returns.
    tamper("DELETE FROM traces_span WHERE request_id = %s", last)
    tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", last)
    tamper("DELETE FROM traces_auditrunlink WHERE request_id = %s", last)
    tamper(
        "UPDATE traces_auditchainhead SET sequence = %s, hash = %s, signature = %s "
        "WHERE tenant = 'acme'",
        earlier.sequence,
        earlier.hash,
        earlier.signature,
    )
    assert verify("acme")[0]  # consistent on its own: only the exported head shows the cut

    ok, output = verify("acme", expect_head=exported)

    assert not ok
    assert (
        "acme: NOT EXTENDING the expected head: the chain was cut back: the expected head is "
        "at link 2, the chain now ends at link 1"
    ) in output
    assert "audit chain broken for acme" in output


def test_a_chain_rewritten_past_the_expected_head_fails_it(acme, tmp_path):
    demo_run(acme)
    exported = tmp_path / "heads.json"
    exported.write_text(audit_head("acme"))
    tamper("UPDATE traces_auditrunlink SET hash = %s WHERE tenant = 'acme'", "f" * 64)

    ok, output = verify("acme", expect_head=exported)

    assert not ok
    assert "link 1 is not the expected head's" in output


def test_an_expected_head_file_that_is_forged_or_unreadable_is_refused(acme, tmp_path):
    demo_run(acme)
    [head] = json.loads(audit_head("acme"))
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps([head | {"sequence": 5}]))
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")

    ok, output = verify("acme", expect_head=forged)
    assert not ok
    assert "the expected head's signature does not match" in output
    with pytest.raises(CommandError, match="is not JSON"):
        call_command("verify_audit", "--expect-head", str(garbage), stdout=StringIO())
    with pytest.raises(CommandError, match="cannot read"):
        call_command("verify_audit", "--expect-head", str(tmp_path / "none"), stdout=StringIO())


# --- What the database gives back ------------------------------------------------------------

ROUND_TRIPS = {
    "1e16": (1e16, 10_000_000_000_000_000),
    "-1e16": (-1e16, -10_000_000_000_000_000),
    "1.2345e16": (1.2345e16, 12_345_000_000_000_000),
    "17 digits": (1.2345678901234568e16, 12_345_678_901_234_568),
    "1.5e300": (1.5e300, int("15" + "0" * 299)),
    "max float": (1.7976931348623157e308, int(Decimal("1.7976931348623157e308"))),
    "-0.0": (-0.0, 0.0),
    "1.0": (1.0, 1.0),
    "1e15": (1e15, 1e15),
    "0.1": (0.1, 0.1),
    "1e-07": (1e-07, 1e-07),
    "tiny": (5e-324, 5e-324),
    "-tiny": (-2.2250738585072014e-308, -2.2250738585072014e-308),
    "huge int": (10**100 + 7, 10**100 + 7),
    "-huge int": (-(2**200), -(2**200)),
    "nul": ("a\x00b", "a\ufffdb"),
    "lone surrogate": ("x\ud800y", "x\ufffdy"),
    "surrogate pair": ("\ud83d\ude00", "\U0001f600"),
    "nested": (
        {"a": [1e16, {"b": (-0.0, 2.5)}], 3: True, None: "k\x00"},
        {"a": [10_000_000_000_000_000, {"b": [0.0, 2.5]}], "3": True, "null": "k\ufffd"},
    ),
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_payloads_are_hashed_as_the_database_gives_them_back(acme, name):
    given, expected = ROUND_TRIPS[name]
    payload = {"value": given, "list": [given]}

    stored = append_audit_record("f" * 32, "acme", "0" * 16, "tool_io", payload)
    anchor_run("f" * 32, "acme", (stored.sequence, stored.hash))
    read = AuditRecord.objects.get(request_id=stored.request_id, sequence=stored.sequence)

    assert read.payload == {"value": expected, "list": [expected]}
    assert canonical(read.payload) == canonical(stored.payload)
    assert hash_of(read) == stored.hash
    assert normalize_json(read.payload) == read.payload  # idempotent
    if isinstance(expected, float) and expected == 0:
        assert math.copysign(1, read.payload["value"]) == 1
    assert verify("acme")[0]


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_normalising_keeps_what_json_keeps_and_names_non_finite_numbers():
    assert normalize_json((1, "a", None, False)) == [1, "a", None, False]
    assert normalize_json({1.5: 1, True: 2, "x\x00": 3}) == {"1.5": 1, "true": 2, "x\ufffd": 3}
    assert normalize_json(Decimal("1.10")) == "1.10"
    assert type(normalize_json(1e16)) is int
    # Seventeen significant digits: the exponent of its shortest text is exactly 0.
    assert repr(1.2345678901234568e16) == "1.2345678901234568e+16"
    assert normalize_json(1.2345678901234568e16) == 12_345_678_901_234_568
    assert type(normalize_json(1.2345678901234568e16)) is int
    assert type(normalize_json(1.0)) is float
    assert to_json_value({"t": (1,)}) == {"t": [1]}
    for bad, path in ((math.nan, "/a/1"), (math.inf, "/a/1"), (-math.inf, "/a/1")):
        with pytest.raises(NonFiniteNumber) as caught:
            normalize_json({"a": [0, bad]})
        assert caught.value.code == "non_finite_number"
        assert caught.value.details["path"] == path
        # The message names the number itself, as the model and the operator are shown it.
        assert str(caught.value).startswith(f"{bad!r} at {path} is not a finite number")
    with pytest.raises(NonFiniteNumber):
        normalize_json({math.nan: 1})


def test_booleans_stay_booleans_not_the_integers_python_takes_them_for():
    # False == 0 and True == 1 in Python: only the types and the JSON text tell them apart.
    value = {"ok": False, "sent": True, "flags": [False, True, 0, 1], "nested": {"x": False}}

    normalized = normalize_json(value)

    assert json.dumps(normalized) == json.dumps(value)
    assert [type(flag) for flag in normalized["flags"]] == [bool, bool, int, int]
    assert normalized["ok"] is False
    assert normalized["nested"]["x"] is False
    assert normalize_json(False) is False
    assert normalize_json(True) is True


def test_keys_of_every_type_are_named_as_json_names_them_and_others_by_their_text():
    keys = {False: 1, True: 2, None: 3, 7: 4, 2.5: 5}

    assert normalize_json(keys) == json.loads(json.dumps(keys))
    assert normalize_json(keys) == {"false": 1, "true": 2, "null": 3, "7": 4, "2.5": 5}
    assert normalize_json({Decimal("2.50"): 1, ("t", 1): 2}) == {"2.50": 1, "('t', 1)": 2}


def test_the_pointer_of_a_non_finite_number_is_that_of_the_first_one_met():
    cases = [
        ({"x/y": {"~": [1, math.inf]}}, "/x~1y/~0/1"),
        ({"a": 1.5, math.nan: 2}, "/nan"),
        ({"a": [math.inf], "b": math.nan}, "/a/0"),
        ((0, {"k": -math.inf}), "/1/k"),
        (math.nan, ""),
    ]
    for value, path in cases:
        with pytest.raises(NonFiniteNumber) as caught:
            normalize_json(value)
        assert caught.value.details["path"] == path, value


def test_a_non_finite_number_leaves_the_run_chain_where_it_was(acme):
    chain = RunChain("e" * 32, "acme")
    before = chain.head

    with pytest.raises(NonFiniteNumber):
        chain.link("0" * 16, "tool_io", {"arguments": {"amount": math.nan}})

    assert chain.head == before
    assert not AuditRecord.objects.filter(request_id="e" * 32).exists()


# --- Append-only ------------------------------------------------------------------------------


def test_the_orm_refuses_to_update_delete_or_side_load_audit_rows(acme):
    run = demo_run(acme)
    first = record(run, 1)
    link = AuditRunLink.objects.get(request_id=run)

    for model in (AuditRecord, AuditRunLink):
        with pytest.raises(AuditRecordImmutable):
            model.objects.filter(tenant="acme").update(hash="")
        with pytest.raises(AuditRecordImmutable):
            model.objects.filter(tenant="acme").delete()
        with pytest.raises(AuditRecordImmutable):
            model.objects.bulk_create([model(tenant="acme")])
    with pytest.raises(AuditRecordImmutable):
        first.delete()
    with pytest.raises(AuditRecordImmutable):
        link.delete()
    first.payload = {"edited": True}
    with pytest.raises(AuditRecordImmutable):
        first.save()
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.bulk_update([first], ["payload"])
    with pytest.raises(AuditRecordImmutable):
        AuditRecord.objects.create(tenant="acme", sequence=99, payload={}, kind="tool_io")
    # Only records made by RunChain.link.
    with pytest.raises(AuditRecordImmutable) as caught:
        insert_records([AuditRecord(tenant="acme", sequence=99, payload={}, hash="1" * 64)])
    assert caught.value.details == {"operation": "insert outside the chain"}
    assert verify("acme")[0]


@on_postgresql
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE traces_auditrecord SET payload = '{}' WHERE request_id = %s",
        "DELETE FROM traces_auditrecord WHERE request_id = %s",
        "UPDATE traces_auditrunlink SET run_hash = 'x' WHERE request_id = %s",
        "DELETE FROM traces_auditrunlink WHERE request_id = %s",
    ],
)
def test_postgresql_triggers_refuse_raw_updates_and_deletes(acme, statement):
    run = demo_run(acme)

    with (
        pytest.raises(DatabaseError, match="audit rows are append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, [run])

    assert verify("acme")[0]


def as_retention(statement: str, run: str) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL harness.audit_retention = 'on'")
        cursor.execute(statement, [run])


@on_postgresql
def test_postgresql_triggers_let_retention_delete_but_never_update(acme):
    run = demo_run(acme)

    with pytest.raises(DatabaseError, match="UPDATE on traces_auditrecord refused"):
        as_retention("UPDATE traces_auditrecord SET payload = '{}' WHERE request_id = %s", run)
    as_retention("DELETE FROM traces_auditrecord WHERE request_id = %s", run)

    assert not AuditRecord.objects.filter(request_id=run).exists()


def test_the_admin_refuses_to_delete_an_audit_record(acme):
    run = demo_run(acme)
    target = record(run, 1)
    admin = Client()
    admin.login(username="admin", password="test-admin-password")

    response = admin.post(f"/admin/traces/auditrecord/{target.id}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert AuditRecord.objects.filter(id=target.id).exists()


# --- Concurrency ------------------------------------------------------------------------------


def test_concurrent_runs_of_one_tenant_append_and_anchor_without_waiting_or_forking(demo):
    """24 drivers of one tenant, each writing its run's records and linking its head in one
    transaction per step (as the engine does): no deadlock, no lost link, the chains verify."""
    runs, steps, per_step = 24, 3, 3
    errors: list[BaseException] = []
    timings: list[float] = []
    start = threading.Barrier(runs)

    def drive(number: int) -> None:
        request_id = f"{number:032x}"
        chain = RunChain(request_id, "acme")
        try:
            start.wait()
            for step in range(steps):
                began = time.perf_counter()
                with transaction.atomic():
                    made = [
                        chain.link(f"{step:08x}{i:08x}", "tool_io", {"step": step, "i": i})
                        for i in range(per_step)
                    ]
                    insert_records(made)
                    if step in (1, steps - 1):  # a pause, then the end
                        anchor_run(request_id, "acme", chain.head)
                timings.append(time.perf_counter() - began)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=drive, args=(n,)) for n in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    report = verify_chain("acme")
    assert report.ok, report.broken
    assert (report.checked, report.runs, report.links) == (runs * steps * per_step, runs, runs * 2)
    assert AuditChainHead.objects.get(tenant="acme").sequence == runs * 2


def test_the_tenant_head_says_when_it_last_moved(acme):
    # The head is moved with a queryset update, which does not apply ``auto_now``.
    demo_run(acme)
    head = AuditChainHead.objects.get(tenant="acme")
    long_ago = head.updated_at - timedelta(days=1)
    AuditChainHead.objects.filter(pk=head.pk).update(updated_at=long_ago)
    before = timezone.now()

    demo_run(acme)

    moved = AuditChainHead.objects.get(tenant="acme")
    assert moved.sequence > head.sequence
    assert moved.updated_at >= before
