"""The demo's business systems: a ticket desk, a customer directory and an e-mail outbox.

They stand in for the real systems a deployment's tools would call; the demo tools act on
them for real, so a run's side effects can be checked in the database.
"""

from django.db import models


class SupportQueue(models.Model):
    tenant = models.CharField(max_length=64)
    name = models.CharField(max_length=64)
    on_call_agent_id = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="queue_unique_per_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name}"


class Customer(models.Model):
    tenant = models.CharField(max_length=64)
    customer_id = models.CharField(max_length=32)
    name = models.CharField(max_length=200)
    phone = models.CharField(max_length=32)
    email = models.EmailField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "customer_id"], name="customer_unique_per_tenant"
            )
        ]

    def __str__(self) -> str:
        return self.customer_id


class TicketStatus(models.TextChoices):
    OPEN = "open"
    ASSIGNED = "assigned"
    ESCALATED = "escalated"
    RESOLVED = "resolved"


class Ticket(models.Model):
    tenant = models.CharField(max_length=64)
    ticket_id = models.CharField(max_length=32)
    title = models.CharField(max_length=300)
    body = models.TextField()
    queue = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=TicketStatus.choices)
    priority = models.CharField(max_length=16, default="normal")
    customer_id = models.CharField(max_length=32, blank=True)
    assignee_id = models.CharField(max_length=64, blank=True)
    escalate_reason = models.TextField(blank=True)
    opened_at = models.DateTimeField()
    sla_due = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["ticket_id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "ticket_id"], name="ticket_unique_per_tenant")
        ]

    def __str__(self) -> str:
        return self.ticket_id


class Notification(models.Model):
    tenant = models.CharField(max_length=64)
    recipient_id = models.CharField(max_length=64)
    ticket_id = models.CharField(max_length=32, blank=True)
    message = models.TextField()
    idempotency_key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"to {self.recipient_id}: {self.message[:40]}"


class OutboxEmail(models.Model):
    """Mail the demo would send outside the company: the sink the chain rules guard."""

    tenant = models.CharField(max_length=64)
    to = models.EmailField()
    subject = models.CharField(max_length=300)
    body = models.TextField()
    idempotency_key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"to {self.to}: {self.subject}"
