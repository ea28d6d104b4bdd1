"""A run's end is final inside the audit chain (issue 21, M6): a correctly hashed record
appended after a finished run is refused (PostgreSQL trigger) and, written past the triggers on
a database copy, reported by ``verify_audit``; an ended run without a final link is reported;
an ended run's records edited with rehash or deleted are caught; and normal runs of every
terminal status verify (no false alarm)."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.models import TERMINAL_STATUSES, Run, RunStatus
from tests import runs
from tests.support.audit import demo_run, paused_run, still_going, tamper, verify
from traces.chain import (
    GENESIS_HASH,
    RunChain,
    anchor_run,
    insert_records,
    record_hash,
    verify_chain,
)
from traces.models import AuditRecord, AuditRunLink

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the triggers exist on PostgreSQL only"
)

FAKE = {"tool": "send_external_email", "status": "ok", "result": {"sent": True}}


@contextlib.contextmanager
def triggers_bypassed() -> Iterator[None]:
    """As on a copy of the database where the triggers were switched off (superuser)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
        try:
            yield
        finally:
            if connection.vendor == "postgresql":
                cursor.execute("SET session_replication_role = origin")


def forged_record(run: str, tenant: str = "acme") -> AuditRecord:
    """A record correctly numbered and hashed after the run's last one."""
    return RunChain(run, tenant).link("f" * 16, "tool_io", FAKE)


def rehash_from(run: str, sequence: int, payload: dict) -> None:
    """Edit record ``sequence`` of ``run`` and recompute its hash and every later one's, as an
    attacker who knows the scheme would (raw SQL, triggers bypassed)."""
    records = list(AuditRecord.objects.filter(request_id=run).order_by("sequence"))
    prev = records[sequence - 2].hash if sequence > 1 else GENESIS_HASH
    for record in records[sequence - 1 :]:
        if record.sequence == sequence:
            record.payload = payload
        new_hash = record_hash(
            tenant=record.tenant,
            sequence=record.sequence,
            prev_hash=prev,
            request_id=record.request_id,
            span_id=record.span_id,
            kind=record.kind,
            payload=record.payload,
            created_at=record.created_at,
        )
        cast = "::jsonb" if connection.vendor == "postgresql" else ""
        tamper(
            f"UPDATE traces_auditrecord SET payload = %s{cast}, prev_hash = %s, hash = %s "  # noqa: S608
            "WHERE id = %s",
            json.dumps(record.payload),
            prev,
            new_hash,
            record.pk,
        )
        prev = new_hash


# --- Records after a final link ---------------------------------------------------------------


def test_the_end_of_a_run_is_a_final_link_inside_its_hash(acme):
    run = demo_run(acme, end=False)

    [link] = AuditRunLink.objects.filter(request_id=run)
    assert link.final is True
    assert link.run_sequence == AuditRecord.objects.filter(request_id=run).count()
    # Dropping the flag (triggers off) breaks the tenant's chain: the hash covers it.
    tamper("UPDATE traces_auditrunlink SET final = false WHERE id = %s", link.pk)
    ok, output = verify("acme")
    assert not ok
    assert "link 1" in output
    assert "does not match its hash (edited)" in output


@on_postgresql
def test_postgresql_refuses_a_record_or_a_link_after_a_final_link(acme):
    run = demo_run(acme, end=False)
    head = RunChain(run, "acme").head

    with (
        pytest.raises(DatabaseError, match="records after its final link are refused"),
        transaction.atomic(),
    ):
        insert_records([forged_record(run)])
    with (
        pytest.raises(DatabaseError, match="links after its final link are refused"),
        transaction.atomic(),
    ):
        anchor_run(run, "acme", head, final=False)

    assert AuditRecord.objects.filter(request_id=run).count() == head[0]
    assert verify("acme")[0]


def test_a_record_appended_after_a_final_link_past_the_triggers_is_reported(acme):
    run = demo_run(acme, end=False)
    forged = forged_record(run)

    with triggers_bypassed():
        insert_records([forged])

    ok, output = verify("acme")
    assert not ok
    assert f"sequence {forged.sequence}" in output
    assert run in output
    assert "appended after the run's final link" in output


def test_a_record_appended_after_a_final_link_is_reported_even_if_the_run_is_said_to_go_on(
    acme,
):
    """The final link is the chain's own word: rewriting the run's status does not help."""
    run = demo_run(acme, end=False)
    with triggers_bypassed():
        insert_records([forged_record(run)])
    still_going(run, RunStatus.RUNNING)

    ok, output = verify("acme")
    assert not ok
    assert "appended after the run's final link" in output


# --- Ended runs must end in a final link ------------------------------------------------------


def test_an_ended_run_whose_last_link_is_not_final_is_reported(acme, monkeypatch):
    run = paused_run(acme, monkeypatch)
    Run.objects.filter(request_id=run).update(status=RunStatus.SUCCEEDED)

    ok, output = verify("acme")
    assert not ok
    assert f"run {run} has ended but its last link is not final" in output


def test_an_ended_run_never_linked_is_reported(acme, monkeypatch):
    monkeypatch.setattr("harness.engine.driver.anchor_run", lambda *args, **kwargs: None)
    run = demo_run(acme, end=False)  # succeeded, and no link at all

    ok, output = verify("acme")
    assert not ok
    assert "the run has ended but records 1 to" in output
    assert run in output


def test_records_appended_to_an_ended_run_after_its_last_link_are_reported(acme, monkeypatch):
    """A run that paused (linked, not final) and was then cancelled: a record added after its
    last link is not covered by any link, and the run has ended."""
    run = paused_run(acme, monkeypatch)
    Run.objects.filter(request_id=run).update(status=RunStatus.CANCELLED)
    last = AuditRunLink.objects.get(request_id=run).run_sequence
    with triggers_bypassed():
        insert_records([forged_record(run)])

    ok, output = verify("acme")
    assert not ok
    assert f"sequence {last + 1} (run {run}): the run has ended but record {last + 1}" in output


# --- Unlinked runs' records ------------------------------------------------------------------


@pytest.mark.parametrize("tampering", ["edited-with-rehash", "deleted-tail", "deleted-whole"])
def test_an_unlinked_ended_runs_records_rewritten_or_deleted_are_detected(
    acme, monkeypatch, tampering
):
    """The engine never linked it (as the reviewer found): the run ended, so its records
    needed a final link — rewriting or deleting them cannot pass as a run still going."""
    with monkeypatch.context() as patch:
        patch.setattr("harness.engine.driver.anchor_run", lambda *args, **kwargs: None)
        run = demo_run(acme, end=False)
    count = AuditRecord.objects.filter(request_id=run).count()
    if tampering == "edited-with-rehash":
        rehash_from(run, 2, {"edited": True})
    elif tampering == "deleted-tail":
        tamper("DELETE FROM traces_auditrecord WHERE request_id = %s AND sequence > 2", run)
    else:
        tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", run)

    ok, output = verify("acme")
    assert not ok, output
    assert run in output
    assert count > 2


@pytest.mark.parametrize("tampering", ["edited-with-rehash", "deleted-tail", "deleted-whole"])
def test_an_ended_runs_records_rewritten_or_deleted_break_its_final_link(acme, tampering):
    run = demo_run(acme, end=False)
    if tampering == "edited-with-rehash":
        rehash_from(run, 2, {"edited": True})
    elif tampering == "deleted-tail":
        tamper("DELETE FROM traces_auditrecord WHERE request_id = %s AND sequence > 2", run)
    else:
        tamper("DELETE FROM traces_auditrecord WHERE request_id = %s", run)

    ok, output = verify("acme")
    assert not ok, output
    assert run in output


# --- No false alarms ------------------------------------------------------------------------


def upgrade_marks_existing_links() -> None:
    """The data step of ``traces.0008_audit_final_run_links``, run on the rows as they are."""
    from django.apps import apps

    migration = importlib.import_module("traces.migrations.0008_audit_final_run_links")
    migration.mark_links_before_final(apps, None)


def test_chains_written_before_final_links_existed_still_verify(acme, monkeypatch):
    """Before the upgrade every link was non-final, also an ended run's last one: those are
    no alarm; records after such a link of an ended run still are."""
    with monkeypatch.context() as patch:  # the engine as it was: links are never final
        patch.setattr(
            "harness.engine.driver.anchor_run",
            lambda request_id, tenant, head, final=False: anchor_run(request_id, tenant, head),
        )
        old, appended_to = demo_run(acme, end=False), demo_run(acme, end=False)
    assert not verify("acme")[0]  # ended runs, last links not final: unless written before

    upgrade_marks_existing_links()
    new = demo_run(acme, end=False)  # after the upgrade: final

    ok, output = verify("acme")
    assert ok, output
    assert not AuditRunLink.objects.filter(request_id=old, final=True).exists()
    assert AuditRunLink.objects.filter(request_id=new, final=True).exists()
    with triggers_bypassed():
        insert_records([forged_record(appended_to)])
    ok, output = verify("acme")
    assert not ok
    assert f"run {appended_to}" in output
    assert "the run has ended but record" in output


TICKET = "T-20250318-007"


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_real_runs_of_each_way_to_end_verify(acme, agent_dir):
    searches = [call("search_tickets", limit=n + 1) for n in range(6)]
    lookup = call("get_ticket", ticket_id=TICKET)
    escalate = call(
        "update_ticket", ticket_id=TICKET, action="escalate", escalate_reason="angry customer"
    )
    # Every agent written before the first run reads the agent folder.
    agents = {
        "succeeded": runs.scripted_agent(agent_dir, [lookup, {"text": "done"}]),
        "step_limit": runs.scripted_agent(agent_dir, searches, max_steps=2),
        "failed": runs.scripted_agent(agent_dir, [lookup] * 4),
        "held": runs.scripted_agent(agent_dir, [escalate]),
    }
    started = {way: runs.start(acme, name, "bob").json() for way, name in agents.items()}
    succeeded, step_limit, failed, held = started.values()
    assert held["status"] == "awaiting_approval"
    cancelled = acme.post(f"/api/v1/runs/{held['id']}/cancel", {}).json()
    ended = [succeeded, step_limit, failed, cancelled]

    assert [run["status"] for run in ended] == ["succeeded", "step_limit", "failed", "cancelled"]
    ok, output = verify("acme")
    assert ok, output
    for run in ended:  # each ended run is closed by one final link naming its last record
        request_id = Run.objects.get(id=run["id"]).request_id
        [final] = AuditRunLink.objects.filter(request_id=request_id, final=True)
        assert final.run_sequence == AuditRecord.objects.filter(request_id=request_id).count()


_tenants = itertools.count()

runs_strategy = st.lists(
    st.tuples(
        st.sampled_from([*sorted(TERMINAL_STATUSES), "running", "awaiting_approval", "queued"]),
        st.lists(st.integers(min_value=1, max_value=4), min_size=0, max_size=4),  # segments
    ),
    min_size=1,
    max_size=5,
)


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=runs_strategy)
def test_runs_of_every_status_written_as_the_engine_does_raise_no_alarm(plan):
    """Interleaved runs: each segment writes some records and links its head (pause, or the
    final link when the run ends); a run still going may end with unlinked records."""
    tenant = f"h{next(_tenants):06d}"  # a fresh tenant per example (rows outlive examples)
    ended: set[str] = set()
    for index, (status, segments) in enumerate(plan):
        request_id = f"{tenant}{index:02d}".ljust(32, "0")[:32]
        chain = RunChain(request_id, tenant, new=True)
        terminal = status in TERMINAL_STATUSES
        for number, size in enumerate(segments):
            last = number == len(segments) - 1
            insert_records([chain.link("0" * 16, "tool_io", {"i": i}) for i in range(size)])
            if last and not terminal and status == "running":
                break  # still going: its last records are not linked yet
            anchor_run(request_id, tenant, chain.head, final=terminal and last)
        if terminal:
            ended.add(request_id)
            if not segments:  # e.g. cancelled while queued: no record, nothing to close
                continue

    report = verify_chain(tenant, ended=ended)

    assert report.ok, report.broken.describe() if report.broken else ""
