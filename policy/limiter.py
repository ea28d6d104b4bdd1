"""Limits shared by every web and worker process: rates, concurrency slots, capped counters.

With ``REDIS_URL`` the state lives in Redis and each operation is one Lua script (atomic on
the server, clocked by the server's ``TIME`` so processes on different hosts agree). Without
it (the embedded tier) the same operations run on the database, serialised by a locked row per
key: slower, but still shared by every process on that database, not per process.

- ``hit_rate``: a sliding-window log (every hit counts for exactly one window);
- ``acquire_slot``/``release_slot``: concurrency slots with a lease, so a crashed worker's
  slot frees itself; re-acquiring refreshes the lease;
- ``incr_capped``/``decr``: a counter that refuses to pass its cap.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from policy.models import LimitBucket, LimitSlot

KEY_PREFIX = "harness:limits:"
logger = logging.getLogger(__name__)

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

        self.client = redis.Redis.from_url(url)
        self._rate = self.client.register_script(_RATE)
        self._slot = self.client.register_script(_SLOT)
        self._capped = self.client.register_script(_CAPPED)

    def hit_rate(self, key: str, limit: int, window_ms: int) -> RateResult:
        member = f"{time.time_ns()}-{secrets.token_hex(4)}"
        allowed, retry_ms = self._rate(keys=[KEY_PREFIX + key], args=[limit, window_ms, member])
        return RateResult(bool(allowed), max(0, int(retry_ms)) / 1000)

    def rate_usage(self, key: str, window_ms: int) -> tuple[int, float]:
        count, retry_ms = self._rate(keys=[KEY_PREFIX + key], args=[0, window_ms, ""])
        return int(count), max(0, int(retry_ms)) / 1000

    def acquire_slot(
        self, key: str, member: str, limit: int, lease_s: int, force: bool = False
    ) -> bool:
        args = [limit, member, lease_s * 1000, "1" if force else "0"]
        return bool(self._slot(keys=[KEY_PREFIX + key], args=args))

    def release_slot(self, key: str, member: str) -> None:
        self.client.zrem(KEY_PREFIX + key, member)

    def incr_capped(self, key: str, cap: int, ttl_s: int) -> bool:
        allowed, _ = self._capped(keys=[KEY_PREFIX + key], args=[cap, ttl_s])
        return bool(allowed)

    def decr(self, key: str) -> None:
        self.client.decr(KEY_PREFIX + key)

    def clear(self) -> None:
        for key in self.client.scan_iter(match=KEY_PREFIX + "*", count=1000):
            self.client.delete(key)


class DatabaseLimiter:
    """The embedded tier's limiter: shared through the database, one locked row per key."""

    name = "database"

    def hit_rate(self, key: str, limit: int, window_ms: int) -> RateResult:
        # A sliding-window log like Redis's: one slot per hit, leased for the window.
        member = f"{time.time_ns()}-{secrets.token_hex(4)}"
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
