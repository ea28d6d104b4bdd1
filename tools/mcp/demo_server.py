"""The demo ticket desk as an MCP server: ``python -m tools.mcp.demo_server [--http PORT]``.

It stands for a business system that ships its own MCP server: it reads the demo desk's
tickets (the same tables ``load_demo`` fills) and knows nothing of Harness's policy. Harness
tells it which tenant and user a call is for in the request's ``_meta`` (``harness/tenant``,
``harness/user``); a call without a tenant is refused.

By default it speaks MCP over stdio (the demo's ``tools/mcp/demo-servers.json`` starts it that
way); ``--http PORT`` serves Streamable HTTP on ``127.0.0.1:PORT/mcp`` instead. Its database is
the one Django's settings name: ``DATABASE_URL`` (the demo's configuration passes Harness's own
as the secret ``DEMO_DESK_DATABASE_URL``), else the embedded SQLite file.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from asgiref.sync import sync_to_async
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TENANT_KEY = "harness/tenant"


def build_server() -> MCPServer:
    server = MCPServer(
        "tickets",
        instructions="The support ticket desk: look tickets up and read customers' messages.",
    )

    def tenant_of(ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        tenant = meta.get(TENANT_KEY)
        if not isinstance(tenant, str) or not tenant:
            raise ToolError(f"no tenant: send it in _meta as {TENANT_KEY!r}")
        return tenant

    @server.tool(
        description="Fetch one support ticket by its id (e.g. T-20250318-007): title, queue, "
        "status, assignee, customer and SLA due time."
    )
    async def get_ticket(ticket_id: str, ctx: Context) -> dict[str, Any]:
        return await sync_to_async(_ticket)(tenant_of(ctx), ticket_id)

    @server.tool(
        description="The customer's messages on a support ticket, oldest first, exactly as "
        "the customer wrote them."
    )
    async def get_ticket_messages(ticket_id: str, ctx: Context) -> dict[str, Any]:
        return await sync_to_async(_messages)(tenant_of(ctx), ticket_id)

    return server


# The MCP demo server's own reads of the demo tables, as a remote server would hold them
# (alike in shape to ``tools.demo.tickets``, which serves the in-process tools).
def _ticket(tenant: str, ticket_id: str) -> dict[str, Any]:
    from tools.demo.models import Ticket

    ticket = Ticket.objects.filter(tenant=tenant, ticket_id=ticket_id).first()
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id}")
    return {
        "ticket_id": ticket.ticket_id,
        "title": ticket.title,
        "queue": ticket.queue,
        "status": ticket.status,
        "priority": ticket.priority,
        "customer_id": ticket.customer_id,
        "assignee_id": ticket.assignee_id or None,
        "sla_due": ticket.sla_due.isoformat(),
    }


def _messages(tenant: str, ticket_id: str) -> dict[str, Any]:
    from tools.demo.models import Ticket

    ticket = Ticket.objects.filter(tenant=tenant, ticket_id=ticket_id).first()
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id}")
    parts = [p.strip() for p in ticket.body.split("\n\n") if p.strip()]
    return {
        "ticket_id": ticket.ticket_id,
        "customer_id": ticket.customer_id,
        "messages": [{"from": "customer", "text": text} for text in parts],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP")
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
    import django

    django.setup()
    server = build_server()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
