"""Prices: the route's own (HARNESS_ROUTES) over the demo price over genai-prices' bundled
table; a model none of them knows is unpriced. Costs are exact: tokens times price in micros."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.messages import Usage
from gateway.pricing import DEMO_PRICE, PriceSource, call_cost, table_cost
from gateway.routes import Price, Route, parse_route
from gateway.services import complete, estimate_cost_usd
from tests.fake_providers import openai_completion, openai_usage
from tests.gateway.conftest import CONVERSATION

REPO = Path(__file__).resolve().parents[2]
# USD per million tokens with up to four decimals, as providers publish them.
rates = st.decimals(min_value=0, max_value=1000, places=4, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=10**9)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    prompt = draw(counts)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=draw(counts),
        cached_tokens=draw(st.integers(min_value=0, max_value=prompt)),
    )


@given(usage=usages(), input=rates, output=rates, cached=rates)
def test_a_cost_is_tokens_times_the_price_exactly_in_micros(usage, input, output, cached):
    price = Price(input=float(input), output=float(output), cached_input=float(cached))

    cost = table_cost(price, usage)

    fresh = usage.prompt_tokens - usage.cached_tokens
    micros = fresh * input + usage.cached_tokens * cached + usage.completion_tokens * output
    assert cost * 10**6 == micros
    assert cost == micros / Decimal(10**6)


@given(usage=usages(), input=rates, output=rates)
def test_cached_tokens_cost_the_input_price_when_the_route_names_no_cached_price(
    usage, input, output
):
    cost = table_cost(Price(input=float(input), output=float(output)), usage)

    assert cost * 10**6 == usage.prompt_tokens * input + usage.completion_tokens * output


def test_the_library_prices_a_known_model():
    route = Route(name="openai:gpt-4o-mini", provider="openai", model="gpt-4o-mini")

    priced = call_cost(route, Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000))

    # genai-prices 0.2.3: gpt-4o-mini at $0.15 in, $0.60 out per million tokens.
    assert priced is not None
    assert priced.source == PriceSource.LIBRARY
    assert priced.usd == Decimal("0.75")


@given(usage=usages(), input=rates, output=rates)
def test_the_routes_own_price_beats_the_library(usage, input, output):
    price = Price(input=float(input), output=float(output))
    route = Route(name="gpt", provider="openai", model="gpt-4o-mini", price=price)

    priced = call_cost(route, usage)

    assert priced is not None
    assert priced.source == PriceSource.ROUTE
    assert priced.usd == table_cost(price, usage)


def test_a_route_override_in_the_settings_beats_the_library(routes):
    routes({"openai:gpt-4o-mini": {"price": {"input": 1, "output": 2}}})

    priced = call_cost(parse_route("openai:gpt-4o-mini"), Usage(1_000_000, 1_000_000))

    assert priced is not None
    assert (priced.source, priced.usd) == (PriceSource.ROUTE, Decimal(3))


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "local-llm"), ("anthropic", "claude-from-the-future")]
)
def test_a_model_no_table_knows_is_unpriced(provider, model):
    route = Route(name=f"{provider}:{model}", provider=provider, model=model)

    assert call_cost(route, Usage(prompt_tokens=100, completion_tokens=10)) is None


@given(usage=usages())
def test_the_scripted_model_is_charged_the_demo_price(usage):
    route = Route(name="scripted:demo", provider="scripted", model="demo")

    priced = call_cost(route, usage)

    assert priced is not None
    assert priced.source == PriceSource.DEMO
    assert priced.usd == table_cost(DEMO_PRICE, usage)


def test_a_gateway_call_to_a_known_model_is_priced_by_the_library(openai_server):
    openai_server.queue(openai_completion("ok", usage=openai_usage(prompt=2_000, completion=500)))

    response = complete("openai:gpt-4o-mini", CONVERSATION, [])

    assert response.cost_usd == pytest.approx((2_000 * 0.15 + 500 * 0.6) / 1e6)
    assert estimate_cost_usd("openai:gpt-4o-mini", 2_000, 500) == response.cost_usd


NO_NETWORK = """
import socket

def refuse(*args, **kwargs):
    raise OSError("network unavailable in this test")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.getaddrinfo = refuse
socket.create_connection = refuse

import django
django.setup()
from genai_prices import data_snapshot
from gateway.messages import Usage
from gateway.pricing import call_cost
from gateway.routes import parse_route

for name in ("openai:gpt-4o", "anthropic:claude-3-5-haiku-latest", "scripted:demo"):
    priced = call_cost(parse_route(name), Usage(prompt_tokens=1000, completion_tokens=100))
    print(name, priced.source, priced.usd)
print("snapshot", data_snapshot.get_snapshot().from_auto_update)
"""


def test_pricing_works_with_the_network_unavailable_and_never_auto_updates():
    result = subprocess.run(
        [sys.executable, "-c", NO_NETWORK],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("openai:gpt-4o genai-prices ")
    assert lines[1].startswith("anthropic:claude-3-5-haiku-latest genai-prices ")
    assert lines[2].startswith("scripted:demo demo ")
    assert lines[3] == "snapshot False"  # the bundled table, never a fetched one
