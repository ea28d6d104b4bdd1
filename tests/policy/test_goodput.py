"""Goodput by default: runs without a limit of their own, against a small daily budget, hold
what their agent is expected to spend from admission, so the ones admitted finish."""

import threading

import pytest
from django.conf import settings
from django.db import connections
from django.db.models import Sum
from django.test import Client

from harness.models import Run
from harness.spend_estimates import forget_estimates
from policy.models import BudgetLedger, TenantLimits
from tests.runs import call, scripted_agent
from traces.models import Span

RUNS = 20
DAILY_TOKENS = 6_000
COMPLETION_RESERVE = 64  # close to what an answer uses: an over-grant would show as overspend
# A 6-step agent: five distinct lookups, then its answer (~1,550 tokens a run: three fit).
SIX_STEPS = [call("search_tickets", text=f"zz{n}", limit=1) for n in range(5)] + [{"text": "ok"}]


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
    agent = scripted_agent(
        agent_dir, SIX_STEPS, max_steps=10, tools=["search_tickets"], system_prompt="Test."
    )

    # Runs refused at admission are sent again once the admitted ones have ended (the first
    # round has no history: the default estimate; the next ones the agent's p95 spend).
    answers, rounds, left = [], [], RUNS
    while left:
        round_answers = race(acme.key, agent, left)
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
