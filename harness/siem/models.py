"""Rows of the SIEM wing (app ``harness``; imported by ``harness.models``)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class SecurityEvent(models.Model):
    """A security event with no row of its own elsewhere: an API key issued, a console
    sign-in, sign-out or refused sign-in. Append-only, hash-chained like the audit
    (``prev_hash`` is the hash of the event before), read by the SIEM delivery."""

    category = models.CharField(max_length=20)  # "api_key" or "console_login"
    activity = models.CharField(max_length=40)  # "create", "login", "logout", "login_failed"…
    outcome = models.CharField(max_length=10)  # "success" or "failure"
    actor = models.CharField(max_length=200, blank=True)
    tenant = models.CharField(max_length=64, blank=True)
    source_ip = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        app_label = "harness"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.category} {self.activity} {self.outcome} by {self.actor}"


class SiemCursor(models.Model):
    """How far one sink has got in one stream: ``position`` is the id of the last record it
    acknowledged. Advanced only after the sink accepted a batch (at least once)."""

    sink = models.CharField(max_length=100)
    stream = models.CharField(max_length=40)
    position = models.BigIntegerField(default=0)
    delivered = models.BigIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_delivered_at = models.DateTimeField(null=True, blank=True)
    # Held by one delivery attempt until then (a worker that died frees it when it passes).
    lease_until = models.DateTimeField(null=True, blank=True)
    # Lag, written at each attempt: records not yet accepted, and how old the oldest is.
    lag_records = models.BigIntegerField(default=0)
    lag_seconds = models.FloatField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "harness"
        ordering = ["sink", "stream"]
        verbose_name = "SIEM cursor"
        constraints = [
            models.UniqueConstraint(fields=["sink", "stream"], name="siem_cursor_unique")
        ]

    def __str__(self) -> str:
        return f"{self.sink}/{self.stream} at {self.position}"


class SiemDeadLetter(models.Model):
    """A record a sink refused for good (an answer that retrying cannot change, e.g. 400): kept
    here, with the sink's answer, so the cursor moves on and an operator can send it again."""

    sink = models.CharField(max_length=100)
    stream = models.CharField(max_length=40)
    position = models.BigIntegerField()
    record = models.JSONField()
    error = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    redelivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "harness"
        ordering = ["-id"]
        verbose_name = "SIEM dead letter"

    def __str__(self) -> str:
        return f"{self.sink}/{self.stream} #{self.position}"
