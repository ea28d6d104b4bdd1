"""Limits shared by every web and worker process: rates, concurrency slots, capped counters.

With ``REDIS_URL`` the state lives in Redis and each operation is one Lua script (atomic on
the server, clocked by the server's ``TIME`` so processes on different hosts agree). Without
it (the embedded tier) the same operations run on the database, serialised by a locked row per
key: slower, but still shared by every process on that database, not per process.

- ``hit_rate``: a sliding-window log (every hit counts for exactly one window);
- ``acquire_slot``/``release_slot``: concurrency slots with a lease, so a crashed worker's
  slot frees itself; re-acquiring refreshes the lease;
- ``incr_capped``/``decr``: a counter that refuses to pass its cap.

A Redis outage fails open (like the gateway's route limits): while Redis does not answer
within ``REDIS_TIMEOUT_S``, rates and slots allow, counters let pass, and a slot that could not
be released is released once Redis answers again (its lease frees it otherwise). Tenant
limits are a fairness device, not a safety one (daily budgets live in the database and still
hold): an outage must neither refuse every new run nor end the runs in flight. After a failed
call Redis is not asked again for ``REDIS_RETRY_S``, so a Redis that times out does not slow
every call by the timeout.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from policy.models import LimitBucket, LimitSlot

KEY_PREFIX = "harness:limits:"

# A rate window's members must differ between every hit of every process (two alike would
# count once). A random tag per process and a counter within it: a fresh random draw per hit
# was a system call on every model call.
_process_tag = secrets.token_hex(6)
_hits = itertools.count()


def _new_process_tag() -> None:
    global _process_tag
    _process_tag = secrets.token_hex(6)  # a forked child (Celery prefork) is another process


os.register_at_fork(after_in_child=_new_process_tag)


def unique_member() -> str:
    return f"{time.time_ns()}-{_process_tag}-{next(_hits)}"


# A limiter call waits this long for Redis at most (connect, then answer), then fails open.
REDIS_TIMEOUT_S = 1.0
# After a failure, calls fail open without asking Redis for this long.
REDIS_RETRY_S = 2.0
logger = logging.getLogger(__name__)
T = TypeVar("T")

_RATE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if ARGV[3] == '' then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if n == 0 then return {n, 0} end
  return {n, tonumber(oldest[2]) + window - now}
end
if n < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"""

_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or ARGV[4] == '1'
   or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], lease)
  return 1
end
return 0
"""

_CAPPED = """
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v >= tonumber(ARGV[1]) then return {0, v} end
v = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return {1, v}
"""


@dataclass(frozen=True)
class RateResult:
    allowed: bool
    retry_after_s: float = 0.0


class Limiter(Protocol):
    name: str

    def hit_rate(self, key: str, limit: int, window_ms: int) -> RateResult: ...

    def rate_usage(self, key: str, window_ms: int) -> tuple[int, float]: ...

    def acquire_slot(
        self, key: str, member: str, limit: int, lease_s: int, force: bool = False
    ) -> bool: ...

    def release_slot(self, key: str, member: str) -> None: ...

    def incr_capped(self, key: str, cap: int, ttl_s: int) -> bool: ...

    def decr(self, key: str) -> None: ...

    def clear(self) -> None: ...


class RedisLimiter:
    name = "redis"

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
        )
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._rate = self.client.register_script(_RATE)
        self._slot = self.client.register_script(_SLOT)
        self._capped = self.client.register_script(_CAPPED)
        self._lock = threading.Lock()
        self._down_until = 0.0  # monotonic; 0 while Redis answers
        self._unreleased: set[tuple[str, str]] = set()

    def _call(self, what: str, operation: Callable[[], T], fallback: T) -> T:
        """Run ``operation`` on Redis, or return ``fallback`` (fail open) if Redis is down.
        Slots left unreleased by an outage are released first, before anything is counted."""
        if self._down_until and time.monotonic() < self._down_until:
            return fallback
        try:
            if self._unreleased:
                self._release_pending()
            result = operation()
        except self._errors as exc:
            with self._lock:
                first = not self._down_until
                self._down_until = time.monotonic() + REDIS_RETRY_S
            if first:
                logger.warning("Redis limiter unavailable, limits not enforced: %s: %s", what, exc)
            return fallback
        if self._down_until:
            with self._lock:
                self._down_until = 0.0
            logger.warning("Redis limiter available again; limits enforced.")
        return result

    def _release_pending(self) -> None:
        with self._lock:
            pending, self._unreleased = self._unreleased, set()
        try:
            for key, member in pending:
                self.client.zrem(KEY_PREFIX + key, member)
        except self._errors:
            with self._lock:
                self._unreleased |= pending
            raise

    def hit_rate(self, key: str, limit: int, window_ms: int) -> RateResult:
        member = unique_member()
        allowed, retry_ms = self._call(
            "hit_rate",
            lambda: self._rate(keys=[KEY_PREFIX + key], args=[limit, window_ms, member]),
            (1, 0),
        )
        return RateResult(bool(allowed), max(0, int(retry_ms)) / 1000)

    def rate_usage(self, key: str, window_ms: int) -> tuple[int, float]:
        count, retry_ms = self._call(
            "rate_usage",
            lambda: self._rate(keys=[KEY_PREFIX + key], args=[0, window_ms, ""]),
            (0, 0),
        )
        return int(count), max(0, int(retry_ms)) / 1000

    def acquire_slot(
        self, key: str, member: str, limit: int, lease_s: int, force: bool = False
    ) -> bool:
        args = [limit, member, lease_s * 1000, "1" if force else "0"]
        return bool(
            self._call("acquire_slot", lambda: self._slot(keys=[KEY_PREFIX + key], args=args), 1)
        )

    def release_slot(self, key: str, member: str) -> None:
        released = self._call("release_slot", lambda: self.client.zrem(KEY_PREFIX + key, member), 0)
        if not released and self._down_until:
            # Redis is down: release the slot when it answers again.
            with self._lock:
                self._unreleased.add((key, member))

    def incr_capped(self, key: str, cap: int, ttl_s: int) -> bool:
        allowed, _ = self._call(
            "incr_capped",
            lambda: self._capped(keys=[KEY_PREFIX + key], args=[cap, ttl_s]),
            (1, 0),
        )
        return bool(allowed)

    def decr(self, key: str) -> None:
        self._call("decr", lambda: self.client.decr(KEY_PREFIX + key), 0)

    def clear(self) -> None:
        # Operators and tests: an outage here is an error, not a silent no-op.
        for key in self.client.scan_iter(match=KEY_PREFIX + "*", count=1000):
            self.client.delete(key)


class DatabaseLimiter:
    """The embedded tier's limiter: shared through the database, one locked row per key."""

    name = "database"

    def hit_rate(self, key: str, limit: int, window_ms: int) -> RateResult:
        # A sliding-window log like Redis's: one slot per hit, leased for the window.
        member = unique_member()
        if self.acquire_slot(key, member, limit, window_ms / 1000):
            return RateResult(True)
        return RateResult(False, self.rate_usage(key, window_ms)[1])

    def rate_usage(self, key: str, window_ms: int) -> tuple[int, float]:
        now = timezone.now()
        live = LimitSlot.objects.filter(key=key, expires_at__gt=now)
        oldest = live.order_by("expires_at").values_list("expires_at", flat=True).first()
        return live.count(), ((oldest - now).total_seconds() if oldest else 0.0)

    def acquire_slot(
        self, key: str, member: str, limit: int, lease_s: float, force: bool = False
    ) -> bool:
        now = timezone.now()
        with transaction.atomic():
            _locked_bucket(key)
            slots = LimitSlot.objects.filter(key=key)
            slots.filter(expires_at__lte=now).delete()
            held = slots.filter(member=member).exists()
            if not (held or force or slots.count() < limit):
                return False
            LimitSlot.objects.update_or_create(
                key=key, member=member, defaults={"expires_at": now + timedelta(seconds=lease_s)}
            )
        return True

    def release_slot(self, key: str, member: str) -> None:
        LimitSlot.objects.filter(key=key, member=member).delete()

    def incr_capped(self, key: str, cap: int, ttl_s: int) -> bool:
        with transaction.atomic():
            bucket = _locked_bucket(key)
            if bucket.count >= cap:
                return False
            bucket.count += 1
            bucket.save(update_fields=["count"])
        return True

    def decr(self, key: str) -> None:
        with transaction.atomic():
            bucket = _locked_bucket(key)
            bucket.count = max(0, bucket.count - 1)
            bucket.save(update_fields=["count"])

    def clear(self) -> None:
        LimitBucket.objects.all().delete()
        LimitSlot.objects.all().delete()


def _locked_bucket(key: str) -> LimitBucket:
    LimitBucket.objects.get_or_create(key=key)
    return LimitBucket.objects.select_for_update().get(key=key)


def get_limiter() -> Limiter:
    """Redis when ``REDIS_URL`` is set, else the database (said in ``limiter.name``)."""
    return _limiter_for(settings.REDIS_URL or "")


@functools.cache
def _limiter_for(redis_url: str) -> Limiter:
    if redis_url:
        return RedisLimiter(redis_url)
    logger.info("Tenant limits are shared through the database: REDIS_URL is not set.")
    return DatabaseLimiter()
