"""Datasets of recorded runs, and experiments that re-execute them with a candidate.

The data model covers the whole of issue 22 (docs/experiments.md), so later work adds
behaviour, not tables: expectations and assertions on items, candidate configurations with a
prompt, agent file, policy change or strategy, live tools, a judge, a separate token budget.
"""

from __future__ import annotations

import uuid

from django.db import models

from harness.models import Run, Tenant


class Dataset(models.Model):
    """A named, tenant-scoped list of items made from recorded runs."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="dataset_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class DatasetItem(models.Model):
    """One recorded run, copied when it was added: who asked what of which agent, the tool
    calls it made with their results, its answer, status and outcome.

    The clear copy (input, calls, results, answer) is only ``sealed`` (encrypted), as the
    run's own; the readable fields are the run's masked ones. An item goes with its run
    (retention deletes both)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="dataset_items")
    position = models.PositiveIntegerField()
    agent = models.CharField(max_length=100)
    user_id = models.CharField(max_length=200)
    input = models.TextField()  # masked, as the run's
    status = models.CharField(max_length=20)
    outcome = models.CharField(max_length=20)
    stop_reason = models.CharField(max_length=40, blank=True)
    answer = models.TextField(blank=True)  # masked, as the run's
    # The calls in order, without arguments or results: [{"step", "tool"}] (for listings).
    tool_calls = models.JSONField(default=list)
    # Sealed {"input", "calls": [{"step", "tool", "arguments", "ok", "executed", "result" |
    # "error"}], "answer", "source"}: what an experiment answers tools from.
    recording = models.TextField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    latency_ms = models.FloatField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=0)
    # What a reviewer expects: {"reference_answer", "must_call": [tool], "must_not_call":
    # [tool], "assertions": [{"type": "contains" | "regex" | "json_schema", "value"}]}.
    expectations = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "run"], name="dataset_item_unique_run")
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id} #{self.position}"


class ExperimentStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    FAILED = "failed"
    # The experiment's own token budget was spent: the items not started were not run.
    BUDGET_EXCEEDED = "budget_exceeded"


class Verdict(models.TextChoices):
    SAME = "same"
    DIVERGED = "diverged"
    REGRESSION = "regression"
    IMPROVED = "improved"
    ERROR = "error"


class Experiment(models.Model):
    """A dataset run again with a candidate configuration."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="experiments")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="experiments")
    # {"model": route, "system_prompt": text, "agent": {agent file}, "policy_changes":
    # [what-if edits], "strategy": "react" | "plan_execute"} (experiments.candidate).
    candidate = models.JSONField(default=dict)
    tools = models.CharField(max_length=10, default="recorded")  # "recorded" | "live"
    # The tools run for real (read-only and idempotent ones only); the rest are recorded.
    live_tools = models.JSONField(default=list, blank=True)
    # The experiment's own token budget (None: none beyond the runs' own), and what its
    # items' runs spent so far.
    token_budget = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_used = models.PositiveBigIntegerField(default=0)
    # How many items run at once (never above the tenant's concurrent runs).
    concurrency = models.PositiveSmallIntegerField(default=4)
    # {"model": route, "rubric": text}: a judge's verdict per item (never the only signal).
    judge = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=20, choices=ExperimentStatus.choices, default=ExperimentStatus.QUEUED
    )
    created_by = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"experiment {self.id} ({self.status})"


class ExperimentItem(models.Model):
    """One dataset item run again: the experiment run it made, and its score."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="items")
    item = models.ForeignKey(DatasetItem, on_delete=models.CASCADE, related_name="experiments")
    # The experiment's own run (``Run.experiment`` is true): recorded like any run.
    run = models.OneToOneField(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="experiment_item"
    )
    status = models.CharField(max_length=20, default=ExperimentStatus.QUEUED)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    # The scoring (experiments.scoring.score_item): trajectory, answer, outcome, tool calls,
    # tokens, assertions; later the judge.
    score = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # When a worker was sent this item (claimed, so that each is sent once at a time).
    sent_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "item__position"]

    def __str__(self) -> str:
        return f"{self.experiment_id} item {self.item_id}: {self.verdict or self.status}"
