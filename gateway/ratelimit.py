"""Client-side limits per route: requests per minute and tokens per minute.

Each limit is a token bucket that refills continuously (its whole capacity per minute). With
``REDIS_URL`` the buckets live in Redis and are taken atomically by a Lua script, so every web
and worker process shares one budget per route, whatever the number of replicas; the clock is
Redis's own. Without Redis (the embedded tier) they live in the process.

A call takes one request and its estimated tokens; when the provider reports the real usage
the difference is charged (or refunded) without waiting, so the bucket may go into debt and
the next calls wait it off. A call that would have to wait longer than the route's
``max_wait_s`` is refused at once with ``ClientRateLimited`` instead of sleeping in vain.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import cache
from typing import Protocol

from django.conf import settings

from gateway.errors import ClientRateLimited
from gateway.routes import Route

logger = logging.getLogger(__name__)

_KEY_PREFIX = "harness:gateway:limit:"

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function level(key, capacity)
  local v = redis.call('HMGET', key, 'level', 'ts')
  local lvl, ts = tonumber(v[1]), tonumber(v[2])
  if lvl == nil then return capacity end
  return math.min(capacity, lvl + (now - ts) * capacity / 60000)
end
local function store(key, lvl, capacity)
  redis.call('HSET', key, 'level', tostring(lvl), 'ts', now)
  redis.call('PEXPIRE', key, math.ceil((capacity - lvl) * 60000 / capacity) + 1000)
end
local rpm, tpm, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[4] == 'charge' then
  if tpm > 0 then store(KEYS[2], level(KEYS[2], tpm) - cost, tpm) end
  return '0'
end
local wait, r, k = 0, 0, 0
if rpm > 0 then
  r = level(KEYS[1], rpm)
  if r < 1 then wait = math.max(wait, (1 - r) * 60000 / rpm) end
end
if tpm > 0 then
  k = level(KEYS[2], tpm)
  local need = math.min(cost, tpm)
  if k < need then wait = math.max(wait, (need - k) * 60000 / tpm) end
end
if wait > 0 then return tostring(wait) end
if rpm > 0 then store(KEYS[1], r - 1, rpm) end
if tpm > 0 then store(KEYS[2], k - cost, tpm) end
return '0'
"""


class Buckets(Protocol):
    def take(self, route: str, rpm: int, tpm: int, tokens: int) -> float:
        """Take one request and ``tokens``; return 0, or the seconds to wait (nothing taken)."""

    def charge(self, route: str, tpm: int, tokens: int) -> None:
        """Charge (or refund, when negative) tokens without waiting."""


class LocalBuckets:
    """The same buckets in this process only (the embedded tier has no Redis)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._levels: dict[str, tuple[float, float]] = {}

    def take(self, route: str, rpm: int, tpm: int, tokens: int) -> float:
        with self._lock:
            now = time.monotonic()
            requests = self._level(f"{route}:requests", rpm, now)
            budget = self._level(f"{route}:tokens", tpm, now)
            wait = 0.0
            if rpm and requests < 1:
                wait = max(wait, (1 - requests) * 60 / rpm)
            if tpm and budget < min(tokens, tpm):
                wait = max(wait, (min(tokens, tpm) - budget) * 60 / tpm)
            if wait > 0:
                return wait
            if rpm:
                self._levels[f"{route}:requests"] = (requests - 1, now)
            if tpm:
                self._levels[f"{route}:tokens"] = (budget - tokens, now)
            return 0.0

    def charge(self, route: str, tpm: int, tokens: int) -> None:
        if not tpm:
            return
        with self._lock:
            now = time.monotonic()
            key = f"{route}:tokens"
            self._levels[key] = (self._level(key, tpm, now) - tokens, now)

    def _level(self, key: str, capacity: int, now: float) -> float:
        if not capacity:
            return 0.0
        level, stamp = self._levels.get(key, (float(capacity), now))
        return min(float(capacity), level + (now - stamp) * capacity / 60)


class RedisBuckets:
    """Buckets in Redis, shared by every process that uses the same Redis."""

    def __init__(self, url: str) -> None:
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._script = self._client.register_script(_TAKE)

    def take(self, route: str, rpm: int, tpm: int, tokens: int) -> float:
        wait_ms = self._script(keys=_keys(route), args=[rpm, tpm, tokens, "take"])
        return float(wait_ms) / 1000

    def charge(self, route: str, tpm: int, tokens: int) -> None:
        if tpm:
            self._script(keys=_keys(route), args=[0, tpm, tokens, "charge"])


def acquire(route: Route, tokens: int) -> float:
    """Wait until the route's limits allow one call of ``tokens``; return the seconds waited.

    Raises ``ClientRateLimited`` when the wait would exceed ``route.max_wait_s``. If Redis is
    unreachable the call goes ahead (a limiter outage must not stop every model call) and a
    warning is logged.
    """
    rpm, tpm = route.requests_per_minute or 0, route.tokens_per_minute or 0
    if not rpm and not tpm:
        return 0.0
    waited = 0.0
    while True:
        try:
            wait = get_buckets().take(route.name, rpm, tpm, tokens)
        except Exception as exc:  # redis.RedisError and socket errors alike
            logger.warning("rate limiter unavailable for %s, not limiting: %s", route.name, exc)
            return waited
        if wait <= 0:
            return waited
        if waited + wait > route.max_wait_s:
            raise ClientRateLimited(
                f"Route {route.name} is at its client-side limit "
                f"({rpm or '-'} requests/min, {tpm or '-'} tokens/min); the next slot is "
                f"{wait:.1f}s away, longer than the {route.max_wait_s:g}s the route may wait.",
                {"route": route.name, "wait_s": round(wait, 3)},
            )
        time.sleep(wait)
        waited += wait


def settle(route: Route, estimated: int, actual: int) -> None:
    """Charge the difference between the real usage and the estimate taken before the call."""
    if route.tokens_per_minute and actual != estimated:
        try:
            get_buckets().charge(route.name, route.tokens_per_minute, actual - estimated)
        except Exception as exc:
            logger.warning("rate limiter unavailable for %s: %s", route.name, exc)


def get_buckets() -> Buckets:
    return _buckets_for(settings.REDIS_URL or "")


@cache
def _buckets_for(redis_url: str) -> Buckets:
    return RedisBuckets(redis_url) if redis_url else LocalBuckets()


def _keys(route: str) -> list[str]:
    return [f"{_KEY_PREFIX}{route}:requests", f"{_KEY_PREFIX}{route}:tokens"]
