"""The approval service under the API and the admin (``build_approval``, ``save_approvals``,
``decide_approval``, ``expire_approvals``): what a held call binds to, who may decide it,
what a decision records, and the errors each refusal carries."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from harness.models import Run, RunStatus
from policy import approvals
from policy.errors import (
    ActingUserRequired,
    ApprovalAlreadyDecided,
    ApprovalArgumentsMismatch,
    ApprovalEditRefused,
    ApprovalNotFound,
    ApproverIsEndUser,
    PermissionDenied,
    RunNotAwaitingApproval,
)
from policy.models import ToolApproval
from policy.services import (
    EditedArguments,
    add_decision_guard,
    add_permission,
    approval_decided,
    build_approval,
    decide_approval,
    expire_approvals,
    get_approval,
    has_pending_approvals,
    list_approvals,
    list_waiting_approvals,
    save_approvals,
)
from tests.factories import create_tenant

pytestmark = pytest.mark.django_db

TENANT = "acme"
ARGUMENTS = {"ticket_id": "T-1", "action": "escalate", "reason": "Zoë is charged twice"}


@pytest.fixture
def run() -> Run:
    """A run waiting for approval, acting for ``bob``; ``ann``, ``bob`` and ``cid`` may
    decide."""
    tenant = create_tenant(slug=TENANT)
    for user in ("ann", "bob", "cid"):
        add_permission(TENANT, user, "approval:decide", "allow", "test")
    return Run.objects.create(
        request_id="r" * 32,
        tenant=tenant,
        agent="ticket-assistant",
        user_id="bob",
        input="escalate it",
        max_steps=5,
        status=RunStatus.AWAITING_APPROVAL,
    )


def held(run: Run, call_id: str = "call_1_1", arguments=None, **options) -> ToolApproval:
    """A held call of ``run``, saved as the engine saves it."""
    approval = build_approval(
        tenant=TENANT,
        run_id=str(run.id),
        call_id=call_id,
        tool="update_ticket",
        user_id=run.user_id,
        arguments=ARGUMENTS if arguments is None else arguments,
        rule="default-escalation-approval",
        reason="update_ticket with action='escalate'",
        policy_version=3,
        **options,
    )
    save_approvals([approval])
    return ToolApproval.objects.get(run_id=str(run.id), call_id=call_id, round=approval.round)


def canonical_sha256(arguments: dict) -> str:
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decide(run: Run, approver: str = "ann", approve: bool = True, **options) -> ToolApproval:
    options.setdefault("arguments_sha256", canonical_sha256(ARGUMENTS))
    return decide_approval(
        tenant=TENANT,
        run_id=str(run.id),
        call_id=options.pop("call_id", "call_1_1"),
        approver=approver,
        approve=approve,
        **options,
    )


# --- A held call -----------------------------------------------------------------------------


def test_a_held_call_binds_to_the_canonical_sha256_of_its_exact_arguments(run, settings):
    settings.HARNESS_APPROVAL_TTL_S = 600
    before = timezone.now()
    arguments = {"z": 1, "a": {"y": "ü", "b": [1, 2]}}

    approval = held(run, arguments=arguments, display_arguments={"z": 1, "a": "[masked]"})

    assert approval.arguments_sha256 == canonical_sha256(arguments)
    assert approval.arguments == {"z": 1, "a": "[masked]"}  # what approvers are shown
    assert (approval.status, approval.round, approval.self_approval) == ("pending", 1, False)
    assert approval.sealed_arguments == ""  # round 1: the model's own, read from the conversation
    assert (approval.tool, approval.user_id, approval.tenant) == ("update_ticket", "bob", TENANT)
    assert (approval.rule, approval.policy_version) == ("default-escalation-approval", 3)
    assert approval.reason == "update_ticket with action='escalate'"
    expires_in = approval.expires_at - before
    assert timedelta(seconds=600) <= expires_in < timedelta(seconds=660)


def test_a_held_call_without_a_masked_copy_shows_its_arguments(run):
    approval = held(run)

    assert approval.arguments == ARGUMENTS
    assert approval.arguments_sha256 == canonical_sha256(ARGUMENTS)


def test_saving_a_held_call_again_keeps_its_first_row(run):
    first = held(run)
    again = build_approval(
        tenant=TENANT,
        run_id=str(run.id),
        call_id="call_1_1",
        tool="update_ticket",
        user_id="bob",
        arguments={"other": True},
        rule="another",
        reason="again",
        policy_version=9,
    )

    save_approvals([again])
    save_approvals([])

    [kept] = ToolApproval.objects.all()
    assert (kept.pk, kept.arguments_sha256, kept.rule) == (
        first.pk,
        first.arguments_sha256,
        first.rule,
    )


def test_the_listing_and_the_pending_flag_follow_the_run(run):
    one, two = held(run, "call_1_1"), held(run, "call_1_2")

    assert [a.call_id for a in list_approvals(TENANT, str(run.id))] == ["call_1_1", "call_1_2"]
    assert list_approvals("globex", str(run.id)) == []
    assert get_approval(two.pk) == two
    assert has_pending_approvals(str(run.id))
    decide(run, call_id="call_1_1")
    assert has_pending_approvals(str(run.id))
    decide(run, call_id="call_1_2", approve=False)
    assert not has_pending_approvals(str(run.id))
    assert get_approval(one.pk).status == "approved"
    held(Run.objects.create(request_id="o" * 32, tenant=run.tenant, input="", max_steps=1))
    assert not has_pending_approvals(str(run.id))  # another run's held call is not this one's


def test_the_listing_is_in_the_order_calls_were_held_rounds_in_order_at_the_same_instant(run):
    first = held(run, "call_1_1")
    held(run, "call_1_1", arguments=EDITED, round=2)
    held(run, "call_2_1")  # held after the edit: listed after it, though a round 1
    at_once = [held(run, "call_3_1", arguments=EDITED, round=2), held(run, "call_3_1")]
    ToolApproval.objects.filter(pk__in=[a.pk for a in at_once]).update(
        created_at=first.created_at + timedelta(seconds=10)
    )

    listed = [(a.call_id, a.round) for a in list_approvals(TENANT, str(run.id))]

    assert listed == [
        ("call_1_1", 1),
        ("call_1_1", 2),
        ("call_2_1", 1),
        ("call_3_1", 1),
        ("call_3_1", 2),
    ]


def test_the_waiting_list_holds_the_pending_calls_not_expired_of_the_tenants_asked_soonest_first(
    run,
):
    """What the console's dashboard shows: the calls still waiting for a decision."""
    now = timezone.now()
    waiting = {}
    # Created in this order, to expire in another: neither order of creation is the list's.
    for tenant, call_id, expires_in in (
        ("acme", "call_1_1", 20),
        ("globex", "call_1_2", 10),
        ("acme", "call_1_3", 30),
        ("initech", "call_1_4", 5),
        ("acme", "call_1_5", 0),  # expires now: no longer waiting, expiry or not
        ("acme", "call_1_6", -5),  # past its expiry, not yet closed by the expiry job
        ("acme", "call_1_7", 15),  # decided
    ):
        approval = held(run, call_id)
        ToolApproval.objects.filter(pk=approval.pk).update(
            tenant=tenant,
            expires_at=now + timedelta(seconds=expires_in),
            created_at=now + timedelta(seconds=len(waiting)),
        )
        waiting[call_id] = approval.pk
    ToolApproval.objects.filter(call_id="call_1_7").update(status="approved", decided_by="ann")

    def listed(tenants, limit=10):
        return [a.call_id for a in list_waiting_approvals(tenants, now, limit)]

    assert listed(None) == ["call_1_4", "call_1_2", "call_1_1", "call_1_3"]
    assert listed({"globex", "acme"}) == ["call_1_2", "call_1_1", "call_1_3"]
    assert listed({"acme"}, limit=1) == ["call_1_1"]
    assert listed(set()) == []


# --- Deciding ------------------------------------------------------------------------------------


def test_an_approval_records_who_when_and_why_and_signals_after_commit(
    run, django_capture_on_commit_callbacks
):
    held(run)
    signalled = []

    def receiver(sender, approval_id, **kwargs):
        signalled.append((sender, approval_id))

    approval_decided.connect(receiver, sender=ToolApproval)  # as a receiver of this model's
    try:
        with django_capture_on_commit_callbacks(execute=True):
            before = timezone.now()
            approval = decide(run, comment="customer confirmed")
    finally:
        approval_decided.disconnect(receiver)

    assert (approval.status, approval.decided_by, approval.comment) == (
        "approved",
        "ann",
        "customer confirmed",
    )
    assert before <= approval.decided_at <= timezone.now()
    assert (approval.edited_arguments, approval.edited_arguments_sha256) == (None, "")
    assert signalled == [(ToolApproval, approval.pk)]


def test_a_denial_is_recorded_as_denied(run):
    held(run)

    approval = decide(run, approve=False, comment="no")

    assert (approval.status, approval.decided_by, approval.comment) == ("denied", "ann", "no")


def test_a_decision_without_a_comment_records_none(run):
    held(run)

    assert decide(run).comment == ""


def test_an_approval_with_edited_arguments_records_both_versions(run):
    held(run)
    seen = []

    def edit(approval: ToolApproval) -> EditedArguments:
        seen.append(approval.call_id)
        return EditedArguments({"action": "resolve"}, "e" * 64, "sealed-text")

    approval = decide(run, edit=edit)

    assert seen == ["call_1_1"]
    assert approval.status == "approved"
    assert approval.arguments == ARGUMENTS
    assert (
        approval.edited_arguments,
        approval.edited_arguments_sha256,
        approval.sealed_edited_arguments,
    ) == ({"action": "resolve"}, "e" * 64, "sealed-text")


def test_a_denial_cannot_carry_edited_arguments(run):
    held(run)

    with pytest.raises(ApprovalEditRefused) as caught:
        decide(run, approve=False, edit=lambda approval: EditedArguments({}, "", ""))

    assert (caught.value.code, caught.value.message) == (
        "approval_edit_refused",
        "Only an approval can change a call's arguments; a denial runs nothing.",
    )
    assert ToolApproval.objects.get().status == "pending"


def test_a_decision_for_other_arguments_is_refused_naming_both_hashes(run):
    approval = held(run)

    with pytest.raises(ApprovalArgumentsMismatch) as caught:
        decide(run, arguments_sha256="0" * 64, edit=pytest.fail)

    assert (caught.value.code, caught.value.message, caught.value.details) == (
        "approval_arguments_mismatch",
        "The arguments you decided on are not the ones held for approval.",
        {"expected_sha256": approval.arguments_sha256, "received_sha256": "0" * 64},
    )
    assert ToolApproval.objects.get().status == "pending"


def test_a_call_is_decided_once(run):
    held(run)
    decide(run, approve=False)

    with pytest.raises(ApprovalAlreadyDecided) as caught:
        decide(run, approver="bob", approve=False)

    assert (caught.value.message, caught.value.details) == (
        "The call was already denied by ann.",
        {"status": "denied", "decided_by": "ann"},
    )
    assert ToolApproval.objects.get().decided_by == "ann"


def test_a_call_not_held_is_not_found(run):
    held(run, "call_1_1")

    with pytest.raises(ApprovalNotFound) as caught:
        decide(run, call_id="call_9_9")
    assert (caught.value.code, caught.value.message, caught.value.details) == (
        "approval_not_found",
        f"No approval for call call_9_9 in run {run.id}.",
        {"run_id": str(run.id), "call_id": "call_9_9"},
    )
    add_permission("globex", "ann", "approval:decide", "allow", "test")
    with pytest.raises(ApprovalNotFound):  # an approver of another tenant names the run
        decide_approval(
            tenant="globex",
            run_id=str(run.id),
            call_id="call_1_1",
            approver="ann",
            approve=True,
            arguments_sha256=canonical_sha256(ARGUMENTS),
        )


def test_deciding_needs_an_approver_with_approval_decide(run):
    held(run)

    with pytest.raises(ActingUserRequired):
        decide(run, approver="")
    with pytest.raises(PermissionDenied) as caught:
        decide(run, approver="eve", edit=pytest.fail)

    assert caught.value.details["scope"] == "approval:decide"
    assert ToolApproval.objects.get().status == "pending"


def test_a_call_of_a_run_that_ended_can_no_longer_be_decided(run):
    held(run)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)

    with pytest.raises(RunNotAwaitingApproval):
        decide(run)

    assert ToolApproval.objects.get().status == "pending"


# --- Rounds: an approver's edit held again -------------------------------------------------------


def test_the_latest_round_of_a_call_is_the_one_decided(run):
    first = held(run)
    decide(run, edit=lambda approval: EditedArguments({"action": "resolve"}, "e" * 64, "s"))
    edited = {"ticket_id": "T-1", "action": "resolve"}
    held(run, arguments=edited, round=2, sealed_arguments="s")

    approval = decide(run, approver="cid", arguments_sha256=canonical_sha256(edited))

    assert (approval.round, approval.status, approval.decided_by) == (2, "approved", "cid")
    assert approval.sealed_arguments == "s"
    assert ToolApproval.objects.get(pk=first.pk).decided_by == "ann"


def test_whoever_edited_a_call_may_not_approve_their_own_edit(run):
    held(run)
    decide(run, edit=lambda approval: EditedArguments({"action": "resolve"}, "e" * 64, "s"))
    edited = {"ticket_id": "T-1", "action": "resolve"}
    held(run, arguments=edited, round=2)

    with pytest.raises(ApproverIsEndUser) as caught:
        decide(run, approver="ann", arguments_sha256=canonical_sha256(edited))

    assert caught.value.message == (
        "ann is who edited them: another approver must decide this call (or the tool file sets "
        "self_approval, or the tenant grants approval:decide_own)."
    )
    assert caught.value.details == {
        "approver": "ann",
        "end_user": "bob",
        "edited_by": "ann",
        "tool": "update_ticket",
    }
    denied = decide(run, approver="ann", approve=False, arguments_sha256=canonical_sha256(edited))
    assert denied.status == "denied"


def edit_to(arguments: dict):
    return lambda approval: EditedArguments(arguments, canonical_sha256(arguments), "s")


EDITED = {"ticket_id": "T-1", "action": "resolve"}


def test_the_editor_is_who_edited_this_call_of_this_run_not_another(run):
    other_run = Run.objects.create(
        request_id="o" * 32,
        tenant=run.tenant,
        agent="ticket-assistant",
        user_id="bob",
        input="escalate it too",
        max_steps=5,
        status=RunStatus.AWAITING_APPROVAL,
    )
    held(run, "call_1_1")
    held(run, "call_1_2")
    decide(run, call_id="call_1_1", approver="ann", edit=edit_to(EDITED))
    held(run, "call_1_1", arguments=EDITED, round=2)
    # Decided later, by someone else: the same call id in another run, another call in this one.
    held(other_run, "call_1_1")
    decide(other_run, call_id="call_1_1", approver="cid", edit=edit_to(EDITED))
    decide(run, call_id="call_1_2", approver="cid", approve=False)

    with pytest.raises(ApproverIsEndUser) as caught:
        decide(run, approver="ann", arguments_sha256=canonical_sha256(EDITED))
    assert caught.value.details["edited_by"] == "ann"

    approved = decide(run, approver="cid", arguments_sha256=canonical_sha256(EDITED))
    assert (approved.round, approved.status, approved.decided_by) == (2, "approved", "cid")


def test_a_later_round_whose_earlier_round_is_gone_names_no_editor(run):
    held(run, arguments=EDITED, round=2)  # as if round 1 had been deleted

    with pytest.raises(ApproverIsEndUser) as caught:
        decide(run, approver="bob", arguments_sha256=canonical_sha256(EDITED))

    assert caught.value.details == {
        "approver": "bob",
        "end_user": "bob",
        "edited_by": "",
        "tool": "update_ticket",
    }
    assert decide(run, approver="ann", arguments_sha256=canonical_sha256(EDITED)).round == 2


# --- Four eyes -----------------------------------------------------------------------------------


def test_the_runs_own_user_may_deny_but_not_approve_its_call(run):
    held(run)

    with pytest.raises(ApproverIsEndUser) as caught:
        decide(run, approver="bob", edit=pytest.fail)

    assert (caught.value.code, caught.value.message) == (
        "approver_is_end_user",
        "bob is the end user of this run: another approver must decide this call (or the tool "
        "file sets self_approval, or the tenant grants approval:decide_own).",
    )
    assert caught.value.details == {
        "approver": "bob",
        "end_user": "bob",
        "edited_by": "",
        "tool": "update_ticket",
    }
    assert ToolApproval.objects.get().status == "pending"
    assert decide(run, approver="bob", approve=False).status == "denied"


def test_a_tool_file_allowing_self_approval_lets_the_runs_user_approve(run):
    held(run, self_approval=True)

    assert decide(run, approver="bob").status == "approved"


def test_the_tenant_may_let_an_approver_decide_their_own_runs_calls(run):
    held(run)
    add_permission(TENANT, "bob", "approval:decide_own", "allow", "test")

    assert decide(run, approver="bob").status == "approved"


# --- Expiry -------------------------------------------------------------------------------------


def test_no_decision_before_the_expiry_means_deny(run, django_capture_on_commit_callbacks):
    for call_id in ("call_1_1", "call_1_2", "call_1_3", "call_1_4"):
        held(run, call_id)
    decide(run, call_id="call_1_3")
    now = timezone.now()
    ToolApproval.objects.filter(call_id__in=["call_1_1", "call_1_3", "call_1_4"]).update(
        expires_at=now
    )
    ToolApproval.objects.filter(call_id="call_1_2").update(expires_at=now + timedelta(minutes=1))

    with django_capture_on_commit_callbacks() as callbacks:
        assert expire_approvals() == 2
    assert expire_approvals() == 0

    assert len(callbacks) == 2
    for call_id in ("call_1_1", "call_1_4"):
        expired = ToolApproval.objects.get(call_id=call_id)
        assert (expired.status, expired.decided_by, expired.comment) == (
            "expired",
            "expiry",
            "no decision in time",
        )
        assert expired.decided_at is not None
    assert ToolApproval.objects.get(call_id="call_1_2").status == "pending"
    assert ToolApproval.objects.get(call_id="call_1_3").decided_by == "ann"


def test_a_decision_after_the_expiry_is_refused_as_expired(run):
    held(run)
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(ApprovalAlreadyDecided) as caught:
        decide(run, edit=pytest.fail)

    assert (caught.value.message, caught.value.details) == (
        "The call was already expired by expiry.",
        {"status": "expired", "decided_by": "expiry"},
    )
    assert ToolApproval.objects.get().status == "expired"


def test_a_decision_at_the_instant_of_its_expiry_is_refused_as_expired(run, monkeypatch):
    """The expiry is inclusive, as ``expire_approvals``' (``expires_at <= now``)."""
    instant = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: instant)
    held(run)
    ToolApproval.objects.update(expires_at=instant)

    with pytest.raises(ApprovalAlreadyDecided) as caught:
        decide(run, edit=pytest.fail)

    assert caught.value.details == {"status": "expired", "decided_by": "expiry"}
    assert ToolApproval.objects.get().status == "expired"


def test_a_decision_closes_its_own_call_and_leaves_other_overdue_calls_to_the_expiry(
    run, django_capture_on_commit_callbacks
):
    held(run, "call_1_1")
    held(run, "call_1_2")
    ToolApproval.objects.filter(call_id="call_1_2").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    with django_capture_on_commit_callbacks() as callbacks:
        assert decide(run, call_id="call_1_1").status == "approved"

    assert len(callbacks) == 1  # one closer, one signal
    assert ToolApproval.objects.get(call_id="call_1_2").status == "pending"
    assert expire_approvals() == 1


# --- Decision guards -----------------------------------------------------------------------------


def test_a_decision_guard_is_asked_before_any_decision_and_may_refuse_it(run, monkeypatch):
    monkeypatch.setattr(approvals, "_decision_guards", [])  # only this test's guard
    held(run)
    asked = []

    def guard(approval: ToolApproval) -> None:
        asked.append(approval.call_id)
        raise RunNotAwaitingApproval("not waiting", {"call_id": approval.call_id})

    add_decision_guard(guard)
    add_decision_guard(guard)  # idempotent

    with pytest.raises(RunNotAwaitingApproval):
        decide(run, edit=pytest.fail)

    assert asked == ["call_1_1"]
    assert ToolApproval.objects.get().status == "pending"


def test_a_decision_racing_the_expiry_loses_if_the_expiry_closed_first(run, monkeypatch):
    """Between the decision's checks and its write, the expiry closes the call (as beat may,
    on another worker): the write is conditional on pending, so exactly one closer wins."""
    monkeypatch.setattr(approvals, "_decision_guards", [])
    held(run)

    def expiry_meanwhile(approval: ToolApproval) -> None:
        ToolApproval.objects.filter(pk=approval.pk).update(expires_at=timezone.now())
        assert expire_approvals() == 1

    add_decision_guard(expiry_meanwhile)

    with pytest.raises(ApprovalAlreadyDecided) as caught:
        decide(run, comment="too late")

    assert (caught.value.message, caught.value.details) == (
        "The call was already expired by expiry.",
        {"status": "expired", "decided_by": "expiry"},
    )
    closed = ToolApproval.objects.get()
    assert (closed.status, closed.decided_by, closed.comment) == (
        "expired",
        "expiry",
        "no decision in time",
    )
