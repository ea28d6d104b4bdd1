"""Goodput by default: runs without a limit of their own, against a small daily budget, hold
what their agent is expected to spend from admission, so the ones admitted finish."""

import dataclasses
import threading

import hypothesis
import hypothesis.strategies as st
import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.models import Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext

from harness.models import Run
from harness.spend_estimates import forget_estimates
from policy.budget import (
    HELD_RETRY_AFTER_S,
    Reservation,
    RunBudget,
    RunEstimate,
    load_run_ledger,
    open_run_budget,
    reserve_day,
    reserve_run,
    run_room,
    save_run_ledger,
    settle_day,
    spend,
)
from policy.errors import TenantBudgetExhausted
from policy.limits import tenant_limits
from policy.models import BudgetLedger, TenantLimits
from tests.runs import call, scripted_agent, start
from traces.models import Span

RUNS = 20
DAILY_TOKENS = 6_000
COMPLETION_RESERVE = 64  # close to what an answer uses: an over-grant would show as overspend
# A 6-step agent: five distinct lookups, then its answer (~1,550 tokens a run: three fit).
SIX_STEPS = [call("search_tickets", text=f"zz{n}", limit=1) for n in range(5)] + [{"text": "ok"}]


def six_step_agent(agent_dir):
    return scripted_agent(
        agent_dir, SIX_STEPS, max_steps=10, tools=["search_tickets"], system_prompt="Test."
    )


def race(key: str, agent: str, count: int) -> list[tuple[int, str, str | None]]:
    """``count`` sync runs posted at once from as many threads, each with its own client and
    database connection: (HTTP status, run status or error code, Retry-After) each."""
    barrier = threading.Barrier(count)
    answers: list[tuple[int, str, str | None]] = []

    def one() -> None:
        client = Client()
        try:
            barrier.wait()
            response = client.post(
                "/api/v1/runs",
                {"agent": agent, "user": "bob", "input": "go"},
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
            body = response.json()
            what = body["status"] if response.status_code == 200 else body["error"]["code"]
            answers.append((response.status_code, what, response.headers.get("Retry-After")))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return answers


@pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="needs PostgreSQL: the point is row locks under concurrent writers",
)
def test_twenty_runs_racing_for_a_small_day_mostly_finish_in_the_default_configuration(
    acme, agent_dir, settings
):
    settings.HARNESS_COMPLETION_RESERVE_TOKENS = COMPLETION_RESERVE
    assert settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS > 0  # the default: estimates on
    forget_estimates()
    TenantLimits.objects.create(
        tenant="acme", daily_tokens=DAILY_TOKENS, runs_per_second=100, max_concurrent_runs=100
    )
    agent = six_step_agent(agent_dir)

    # Runs refused at admission are sent again once the admitted ones have ended (the first
    # round has no history: the default estimate; the next ones the agent's p95 spend).
    answers, rounds, left = [], [], RUNS
    while left:
        round_answers = race(acme.key, agent, left)
        assert len(round_answers) == left  # every request answered
        admitted = [a for a in round_answers if a[0] == 200]
        answers += round_answers
        rounds.append(len(admitted))
        if not admitted:
            break
        left -= len(admitted)

    admitted = [what for status, what, _ in answers if status == 200]
    refused = [(what, retry) for status, what, retry in answers if status != 200]
    assert {status for status, _, _ in answers} <= {200, 429}
    assert admitted.count("succeeded") >= 3, rounds
    assert set(admitted) <= {"succeeded", "budget_exceeded"}
    assert admitted.count("budget_exceeded") <= 1, (rounds, admitted)
    assert refused, "a 6,000-token day cannot admit twenty such runs"
    for code, retry in refused:
        assert code == "tenant_budget_exhausted"
        assert retry is not None
        assert int(retry) >= 1
    assert max(rounds[1:], default=0) >= 2, f"runs with history run side by side: {rounds}"
    # Reservations all given back; the day holds exactly what the runs spent, never more than
    # its limit plus what one call used beyond its own reservation.
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    spent = Run.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert day.tokens_reserved == 0
    assert BudgetLedger.objects.filter(key__startswith="run:", tokens_reserved__gt=0).count() == 0
    assert day.tokens_used == spent["p"] + spent["c"]
    largest_call = max(
        s.attributes["prompt_tokens"] + s.attributes.get("completion_tokens", 0)
        for s in Span.objects.filter(kind="model_call")
    )
    assert day.tokens_used <= DAILY_TOKENS + largest_call
    succeeded = admitted.count("succeeded")
    print(f"rounds admitted {rounds}; {succeeded} succeeded; spent {day.tokens_used}")


def held(run):
    return BudgetLedger.objects.get(key=f"run:{run['id']}").tokens_reserved


def the_day():
    return BudgetLedger.objects.get(key__startswith="tenant:acme:")


def test_a_run_holds_the_default_then_its_agents_p95_spend_and_gives_back_the_rest(
    acme, agent_dir, settings
):
    settings.HARNESS_COMPLETION_RESERVE_TOKENS = COMPLETION_RESERVE
    forget_estimates()
    TenantLimits.objects.create(tenant="acme", daily_tokens=40_000)
    agent = six_step_agent(agent_dir)

    cold = start(acme, agent, mode="async").json()  # no history yet
    held_cold, day_cold = held(cold), the_day().tokens_reserved
    cancelled = acme.post(f"/api/v1/runs/{cold['id']}/cancel", {})
    done = start(acme, agent).json()
    warm = start(acme, agent, mode="async").json()

    assert held_cold == day_cold == settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS
    assert cancelled.status_code == 200
    assert held(cold) == 0
    assert done["status"] == "succeeded"
    assert done["usage"]["budget"]["tokens_reserved"] == 0  # a finished run holds nothing
    spent = done["usage"]["total_tokens"]
    assert held(warm) == spent + COMPLETION_RESERVE  # p95 of one run: that run, plus an answer
    day = the_day()
    assert day.tokens_reserved == held(warm)  # the others gave back what they held
    assert day.tokens_used == spent


def test_a_run_past_its_estimate_grows_its_hold_until_the_day_cannot_cover_it(
    acme, agent_dir, settings
):
    settings.HARNESS_COMPLETION_RESERVE_TOKENS = COMPLETION_RESERVE
    settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = 300  # a run spends ~1,550
    forget_estimates()
    TenantLimits.objects.create(tenant="acme", daily_tokens=1_200)

    run = start(acme, six_step_agent(agent_dir)).json()

    assert run["status"] == "budget_exceeded"
    assert "Tenant acme has used its daily token budget" in run["answer"]
    day = the_day()
    assert run["usage"]["total_tokens"] == day.tokens_used <= 1_200
    assert run["usage"]["total_tokens"] > 300  # it grew past its estimate while it could
    assert day.tokens_reserved == 0


def test_a_run_refused_while_runs_in_flight_hold_the_day_may_retry_in_seconds(
    acme, agent_dir, settings
):
    TenantLimits.objects.create(tenant="acme", daily_tokens=6_000)
    agent = six_step_agent(agent_dir)
    holding = start(acme, agent, mode="async")  # holds the default, 4,096 of 6,000

    refused = start(acme, agent, mode="async")
    BudgetLedger.objects.filter(key__startswith="tenant:acme:").update(tokens_used=5_500)
    spent = start(acme, agent, mode="async")

    assert holding.status_code == 202
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "tenant_budget_exhausted"
    assert "held by runs in flight" in error["message"]
    assert error["details"]["estimated"] is True
    assert refused["Retry-After"] == str(HELD_RETRY_AFTER_S)
    assert spent.status_code == 429
    assert spent.json()["error"]["code"] == "tenant_budget_exhausted"
    assert int(spent["Retry-After"]) > HELD_RETRY_AFTER_S  # spent indeed: at midnight UTC
    assert Run.objects.count() == 1


def test_with_no_default_reserve_a_run_without_a_limit_reserves_per_model_call(
    acme, agent_dir, settings
):
    settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = 0
    forget_estimates()
    TenantLimits.objects.create(tenant="acme", daily_tokens=40_000)
    agent = six_step_agent(agent_dir)
    assert start(acme, agent).json()["status"] == "succeeded"  # history, ignored

    queued = start(acme, agent, mode="async").json()

    assert held(queued) == 0
    assert the_day().tokens_reserved == 0


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    # Each example writes ledger rows: slow on a loaded machine, which is no failure.
    suppress_health_check=[
        hypothesis.HealthCheck.function_scoped_fixture,
        hypothesis.HealthCheck.too_slow,
    ],
)
@hypothesis.given(
    limit=st.integers(500, 6_000),
    runs=st.lists(
        st.tuples(
            st.integers(1, 4_000),  # the estimate held at admission
            st.lists(  # calls: what the guard reserves, the share of it really used, a pause
                st.tuples(st.integers(1, 1_500), st.floats(0, 1), st.booleans()), max_size=6
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    data=st.data(),
)
def test_holds_never_go_negative_and_the_day_never_promises_more_than_its_limit(
    db, limit, runs, data
):
    """Runs holding estimates, interleaved at random: admission, calls that grow the hold or
    stop the run, pauses (a segment written, the ledger read again), ends."""
    BudgetLedger.objects.all().delete()
    limits = dataclasses.replace(tenant_limits("acme"), daily_tokens=limit)
    ledgers, pending = {}, {}
    for n, (estimate, calls) in enumerate(runs):
        run_id = f"run-{n}"
        open_run_budget("acme", run_id, RunBudget())
        try:
            reserve_run("acme", run_id, RunBudget(), limits, RunEstimate(tokens=estimate))
        except TenantBudgetExhausted:
            continue
        ledgers[run_id], pending[run_id] = load_run_ledger("acme", run_id), list(calls)
        check_day(limit)

    while pending:
        run_id = data.draw(st.sampled_from(sorted(pending)))
        ledger = ledgers[run_id]
        if not pending[run_id]:
            save_run_ledger(ledger, 0, ended=True)
            del pending[run_id]
        else:
            tokens, share, pause = pending[run_id].pop(0)
            if ledger.mode == "per_call":
                # A pause drew the hold to nothing: as the guard does (RunGuard._per_call), each
                # call is then reserved from the day and settled with what it used.
                granted = reserve_day("acme", tokens, 0, limits)
                if not isinstance(granted, Reservation):
                    pending[run_id] = []
                else:
                    settle_day(granted, int(tokens * share), 0)
                    spend(ledger, int(tokens * share), 0, per_call=True)
            elif run_room(ledger, tokens, 0, 0) is not None:  # the day cannot cover it: stop
                pending[run_id] = []
            else:
                spend(ledger, int(tokens * share), 0, per_call=False)
                if pause:
                    save_run_ledger(ledger, 0, ended=False)
                    ledgers[run_id] = load_run_ledger("acme", run_id)
        check_day(limit)
        assert all(row.tokens_reserved >= 0 for row in BudgetLedger.objects.all())

    day = BudgetLedger.objects.filter(key__startswith="tenant:acme:").first()
    runs_spent = BudgetLedger.objects.filter(key__startswith="run:").aggregate(t=Sum("tokens_used"))
    assert day.tokens_reserved == 0
    assert day.tokens_used == (runs_spent["t"] or 0)


def check_day(limit):
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    assert day.tokens_reserved >= 0
    assert day.tokens_used + day.tokens_reserved <= limit


def test_a_daily_cost_budget_is_held_and_grown_the_same_way(acme, agent_dir, settings):
    settings.HARNESS_COMPLETION_RESERVE_TOKENS = COMPLETION_RESERVE
    forget_estimates()
    TenantLimits.objects.create(tenant="acme", daily_cost_usd=1)
    agent = six_step_agent(agent_dir)  # ~1,550 tokens a run: ~1.55 USD at 0.001 USD a token
    route = f"scripted:{next(agent_dir.parent.glob('script-*.json'))}"
    settings.HARNESS_ROUTES = {route: {"price": {"input": 1000.0, "output": 1000.0}}}

    queued = start(acme, agent, mode="async").json()
    holding = BudgetLedger.objects.get(key=f"run:{queued['id']}").cost_reserved_micros
    acme.post(f"/api/v1/runs/{queued['id']}/cancel", {})
    run = start(acme, agent).json()

    assert holding == 1_000_000  # the default's price (4.1 USD), capped at the day's limit
    assert run["status"] == "budget_exceeded"
    assert "Tenant acme has used its daily cost budget" in run["answer"]
    day = the_day()
    assert day.cost_reserved_micros == 0
    assert day.cost_used_micros == round(run["usage"]["budget"]["cost_usd"] * 1_000_000)
    assert day.cost_used_micros <= 1_000_000


def test_the_estimate_is_read_once_and_kept_a_few_seconds(acme, agent_dir, settings):
    forget_estimates()
    TenantLimits.objects.create(tenant="acme", daily_tokens=40_000)
    agent = six_step_agent(agent_dir)
    assert start(acme, agent).json()["status"] == "succeeded"  # history

    reads = []
    for _ in range(3):
        with CaptureQueriesContext(connection) as queries:
            assert start(acme, agent, mode="async").status_code == 202
        reads.append(sum('FROM "harness_run"' in q["sql"] for q in queries.captured_queries))

    assert reads[0] >= 1  # the agent's recent runs, read once...
    assert reads[1:] == [reads[0] - 1] * 2  # ...then kept
