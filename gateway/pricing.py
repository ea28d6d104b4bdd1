"""What a model call costs, in US dollars, and where its price came from.

A route's price comes from, in this order:

1. the route's own ``price`` in ``HARNESS_ROUTES`` (the operator's override, USD per million
   tokens: ``input``, ``output``, ``cached_input``);
2. the demo price, for the scripted model only (``DEMO_PRICE``: made up, so that the offline
   demo shows costs; no real model is priced at it);
3. the price table of the ``genai-prices`` library for the route's provider and model.

A route with none of them is unpriced: its calls cost ``None``, shown as "no price", never as
$0. The library's table is the snapshot bundled in the installed package (its version is pinned
in requirements.txt). Its background updater (``genai_prices.UpdatePrices``) is never started
here, so pricing never reaches the network: prices change when the pin is bumped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

import genai_prices

from gateway.messages import Usage
from gateway.routes import Price, Route

# USD per million tokens for the scripted model: about what a mid-sized hosted model costs,
# so a demo run costs a fraction of a cent and the cost pages have something to show.
DEMO_PRICE = Price(input=3.0, output=15.0, cached_input=0.3)
MILLION = Decimal(1_000_000)


class PriceSource(StrEnum):
    ROUTE = "route"  # HARNESS_ROUTES
    DEMO = "demo"  # DEMO_PRICE, the scripted model
    LIBRARY = "genai-prices"


@dataclass(frozen=True)
class CallCost:
    usd: Decimal
    source: PriceSource


def call_cost(route: Route, usage: Usage, at: datetime | None = None) -> CallCost | None:
    """The exact cost of a call of ``usage`` on ``route`` (``at``: when it was made, for the
    library's dated prices; now by default); ``None`` when the route has no price."""
    table = route.price or (DEMO_PRICE if route.provider == "scripted" else None)
    if table is not None:
        source = PriceSource.ROUTE if route.price else PriceSource.DEMO
        return CallCost(table_cost(table, usage), source)
    try:
        priced = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.prompt_tokens,
                cache_read_tokens=usage.cached_tokens,
                output_tokens=usage.completion_tokens,
            ),
            route.model,
            provider_id=route.provider,
            genai_request_timestamp=at,
        )
    except LookupError:  # a model (or provider) the library does not know
        return None
    return CallCost(priced.total_price, PriceSource.LIBRARY)


def table_cost(price: Price, usage: Usage) -> Decimal:
    """USD for ``usage`` at ``price`` (per million tokens), exactly: a price per million
    tokens is micro-dollars per token, so the sum is in micros and the result is that over a
    million. Cached prompt tokens cost ``cached_input`` (``input`` if not given)."""
    cached_rate = price.input if price.cached_input is None else price.cached_input
    fresh = max(usage.prompt_tokens - usage.cached_tokens, 0)
    cached = usage.prompt_tokens - fresh
    micros = (
        fresh * _rate(price.input)
        + cached * _rate(cached_rate)
        + usage.completion_tokens * _rate(price.output)
    )
    return micros / MILLION


def _rate(value: float) -> Decimal:
    # The shortest decimal that reads back as the float: 0.15, not 0.1499999999999999944…
    return Decimal(str(value))


__all__ = ["DEMO_PRICE", "CallCost", "PriceSource", "call_cost", "table_cost"]
