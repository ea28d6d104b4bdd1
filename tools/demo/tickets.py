"""Handlers of the demo tools. Each takes ``(arguments, context)`` and returns JSON data.

Writes use the call's idempotency key, so a call executed twice acts once.
"""

from typing import Any

from django.db import transaction
from django.utils import timezone

from tools.context import ToolContext
from tools.demo.models import Customer, Notification, OutboxEmail, SupportQueue, Ticket


class TicketNotFound(Exception):
    pass


def get_ticket(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    ticket = _ticket(context.tenant, arguments["ticket_id"])
    data = _ticket_data(ticket)
    queue = SupportQueue.objects.filter(tenant=context.tenant, name=ticket.queue).first()
    data["queue_on_call_agent_id"] = queue.on_call_agent_id if queue else None
    data["days_open"] = (timezone.now() - ticket.opened_at).days
    return data


def search_tickets(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    tickets = Ticket.objects.filter(tenant=context.tenant)
    if status := arguments.get("status"):
        tickets = tickets.filter(status=status)
    if queue := arguments.get("queue"):
        tickets = tickets.filter(queue=queue)
    if text := arguments.get("text"):
        tickets = tickets.filter(title__icontains=text)
    if arguments.get("unassigned"):
        tickets = tickets.filter(assignee_id="")
    limit = arguments.get("limit", 20)
    found = [_ticket_data(t) for t in tickets[:limit]]
    return {"count": len(found), "tickets": found}


def update_ticket(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    with transaction.atomic():
        ticket = _ticket(context.tenant, arguments["ticket_id"], for_update=True)
        action = arguments["action"]
        if action == "assign":
            ticket.assignee_id = arguments["assignee_id"]
            ticket.status = "assigned"
        elif action == "resolve":
            ticket.status = "resolved"
        elif action == "escalate":
            ticket.status = "escalated"
            ticket.escalate_reason = arguments["escalate_reason"]
        ticket.save()
    return _ticket_data(ticket)


def notify_user(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    notification, created = Notification.objects.get_or_create(
        idempotency_key=context.idempotency_key,
        defaults={
            "tenant": context.tenant,
            "recipient_id": arguments["user_id"],
            "ticket_id": arguments.get("ticket_id", ""),
            "message": arguments["message"],
        },
    )
    return {"notification_id": notification.pk, "delivered": True, "duplicate": not created}


def get_customer(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    customer = Customer.objects.filter(
        tenant=context.tenant, customer_id=arguments["customer_id"]
    ).first()
    if customer is None:
        raise LookupError(f"no customer {arguments['customer_id']}")
    return {
        "customer_id": customer.customer_id,
        "name": customer.name,
        "phone": customer.phone,
        "email": customer.email,
    }


# Idempotent as ``notify_user`` is (get_or_create on the call's key): the same two lines of
# Django, on another model with its own fields.
def send_external_email(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    email, created = OutboxEmail.objects.get_or_create(
        idempotency_key=context.idempotency_key,
        defaults={
            "tenant": context.tenant,
            "to": arguments["to"],
            "subject": arguments["subject"],
            "body": arguments["body"],
        },
    )
    return {"outbox_id": email.pk, "queued": True, "duplicate": not created}


def _ticket(tenant: str, ticket_id: str, for_update: bool = False) -> Ticket:
    tickets = Ticket.objects.select_for_update() if for_update else Ticket.objects
    ticket = tickets.filter(tenant=tenant, ticket_id=ticket_id).first()
    if ticket is None:
        raise TicketNotFound(f"no ticket {ticket_id}")
    return ticket


def _ticket_data(ticket: Ticket) -> dict[str, Any]:
    return {
        "ticket_id": ticket.ticket_id,
        "title": ticket.title,
        "body": ticket.body,
        "queue": ticket.queue,
        "status": ticket.status,
        "priority": ticket.priority,
        "customer_id": ticket.customer_id,
        "assignee_id": ticket.assignee_id or None,
        "opened_at": ticket.opened_at.isoformat(),
        "sla_due": ticket.sla_due.isoformat(),
    }
