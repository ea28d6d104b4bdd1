from django.db import models


class PolicyVersion(models.Model):
    """One row per tenant-less deployment: bumped in the same transaction as any rule edit.

    Every process compares it with the version its enforcer was loaded at, so an edit reaches
    every web and worker process on its next decision without a restart.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"policy v{self.version}"


class PolicyChange(models.Model):
    """An audited edit of the rules: who, when, the rule and the version it produced."""

    tenant = models.CharField(max_length=64)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=16)  # "add" or "remove"
    rule = models.JSONField()
    version = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"v{self.version} {self.action} {self.rule} by {self.actor}"
