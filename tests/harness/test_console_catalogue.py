"""The console's catalogue (``harness.console.catalogue``): agents, tools and MCP servers read
from the deployment's files, shown to any staff user; what belongs to a tenant (its policy's
permission lines, its calls refused for drift) only for the tenants granted to the user."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from harness.console.catalogue import list_server_entries, list_tool_entries
from harness.models import StaffTenantGrant, Tenant
from policy import services as policy
from traces.models import Span, SpanKind, SpanStatus

PAGES = ["/admin/catalogue/agents/", "/admin/catalogue/tools/", "/admin/catalogue/mcp/"]
_ids = itertools.count(1)


def staff(username: str, *tenants: str, superuser: bool = False):
    user = get_user_model().objects.create_user(
        username, password="pw", is_staff=True, is_superuser=superuser
    )
    for slug in tenants:
        StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug=slug))
    return user


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def drifted_call(tenant: str, tool: str, at: datetime) -> Span:
    """A call the MCP handler refused because its tool's pin no longer matched."""
    n = next(_ids)
    return Span.objects.create(
        request_id=f"req{n:020d}",
        tenant=tenant,
        span_id=uuid.uuid4().hex[:16],
        sequence=1,
        kind=SpanKind.TOOL_CALL,
        name=tool,
        status=SpanStatus.ERROR,
        started_at=at,
        ended_at=at,
        duration_ms=1.0,
        attributes={"error_code": "tool_drifted"},
    )


@pytest.fixture
def acme_only_grant(demo) -> None:
    """A permission line only acme's policy has: dave may read customers."""
    policy.add_permission("acme", "dave", "customer:read", "allow", actor="tests")


@pytest.mark.parametrize("page", PAGES)
def test_an_anonymous_visitor_is_sent_to_the_login(db, page):
    response = Client().get(page)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize("page", PAGES)
def test_a_signed_in_user_who_is_not_staff_is_sent_to_the_login(db, page):
    user = get_user_model().objects.create_user("eve", password="pw")

    response = client_of(user).get(page)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_the_agents_page_shows_route_tools_strategy_limits_and_file(demo):
    page = client_of(staff("olga", "acme")).get("/admin/catalogue/agents/").content.decode()

    assert 'id="agent-ticket-assistant"' in page
    assert "the default route" in page  # the demo agent names no route
    assert "react" in page
    assert "steps <strong>8</strong>" in page
    assert "tokens per run <strong>20000</strong>" in page
    assert "harness/agents/ticket-assistant.json" in page
    assert '#tool-get_ticket">get_ticket</a>' in page
    # get_ticket_messages is an MCP tool and no server is configured here: it is off.
    assert "Off or missing" in page
    assert "get_ticket_messages" in page


def test_the_tools_page_shows_each_argument_as_a_row_not_json(demo):
    page = client_of(staff("olga", "acme")).get("/admin/catalogue/tools/").content.decode()

    assert 'id="tool-update_ticket"' in page
    assert "<code>ticket_id</code></td><td>string</td><td><strong>required</strong>" in page
    assert "pattern ^T-[0-9]{8}-[0-9]{3}$" in page
    assert '"properties"' not in page  # no raw schema
    assert "No other argument is accepted." in page


def test_staff_see_who_may_call_a_tool_only_in_their_own_tenants(acme_only_grant):
    acme_page = client_of(staff("olga", "acme")).get("/admin/catalogue/tools/").content.decode()
    globex_page = client_of(staff("gus", "globex")).get("/admin/catalogue/tools/").content.decode()
    nobody_page = client_of(staff("newcomer")).get("/admin/catalogue/tools/").content.decode()

    assert "acme: dave allow" in acme_page
    assert "acme: role:member allow" in acme_page
    assert "globex:" not in acme_page
    assert "globex: role:member allow" in globex_page
    assert "acme:" not in globex_page
    assert "dave" not in globex_page
    assert "acme:" not in nobody_page
    assert "globex:" not in nobody_page
    # The catalogue itself is the deployment's: everyone sees every tool.
    assert 'id="tool-get_customer"' in globex_page
    assert 'id="tool-get_customer"' in nobody_page


def test_a_superuser_sees_every_tenants_permission_lines(acme_only_grant):
    page = client_of(staff("root", superuser=True)).get("/admin/catalogue/tools/")

    assert "acme: dave allow" in page.content.decode()
    assert "globex: role:member allow" in page.content.decode()


def test_a_tool_matches_wildcard_permission_lines_as_the_policy_does(demo):
    policy.add_permission("acme", "ops", "*:read", "allow", actor="tests")
    policy.add_permission("acme", "mallory", "ticket:*", "deny", actor="tests")
    policy.add_permission("acme", "carol", "email:send_external", "allow", actor="tests")

    entries = {e.tool.name: e for e in list_tool_entries(staff("olga", "acme"), probe=False).tools}
    subjects = {name: {g.subject for g in e.grants} for name, e in entries.items()}

    assert {"ops", "mallory"} <= subjects["get_ticket"]
    assert "carol" not in subjects["get_ticket"]
    assert "mallory" in subjects["update_ticket"]
    assert "ops" not in subjects["update_ticket"]
    assert "carol" in subjects["send_external_email"]


def test_the_mcp_page_lists_a_server_named_only_by_a_pinned_tool_as_not_configured(demo, settings):
    settings.HARNESS_MCP_CONFIG = ""

    [entry] = list_server_entries(staff("olga", "acme")).servers
    page = client_of(staff("gus", "globex")).get("/admin/catalogue/mcp/").content.decode()

    assert entry.state.name == "tickets"
    assert not entry.state.configured
    assert not entry.state.connected
    assert entry.state.pinned == {"get_ticket_messages": "get_ticket_messages"}
    assert "HARNESS_MCP_CONFIG is unset" in page
    assert "named by pinned tools, which are off" in page


def test_an_unreachable_server_is_shown_with_why_and_its_pins_unknown(demo, settings, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"tickets": {"command": "/nonexistent/srv"}}}))
    settings.HARNESS_MCP_CONFIG = str(config)
    settings.HARNESS_MCP_CONNECT_TIMEOUT_S = 2
    user = staff("olga", "acme")

    [server] = list_server_entries(user).servers
    tools = {e.tool.name: e for e in list_tool_entries(user).tools}

    assert server.state.configured
    assert not server.state.connected
    assert server.state.error
    assert server.state.target == "/nonexistent/srv"
    assert tools["get_ticket_messages"].pin_word == "unknown"
    assert "not reached" in tools["get_ticket_messages"].pin_state


def test_the_last_drifted_call_is_shown_only_to_staff_of_its_tenant(demo, settings):
    settings.HARNESS_MCP_CONFIG = ""
    drifted_call("acme", "get_ticket_messages", datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    drifted_call("acme", "get_ticket_messages", datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    drifted_call("acme", "get_ticket", datetime(2026, 11, 30, 11, 0, tzinfo=UTC))  # not MCP

    [acme_view] = list_server_entries(staff("olga", "acme"), probe=False).servers
    [globex_view] = list_server_entries(staff("gus", "globex"), probe=False).servers
    tools = {e.tool.name: e for e in list_tool_entries(staff("ada", "acme"), probe=False).tools}

    assert acme_view.last_drift["started_at"] == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    assert acme_view.last_drift["tenant"] == "acme"
    assert globex_view.last_drift is None
    assert tools["get_ticket_messages"].last_drift["started_at"].hour == 10
    assert tools["get_ticket"].last_drift is None


def test_the_dashboard_links_to_the_catalogue(demo):
    page = client_of(staff("olga", "acme")).get("/admin/").content.decode()

    for href in PAGES:
        assert f'href="{href}"' in page


def test_an_mcp_tool_shows_its_pin_and_why_its_state_is_unknown(demo, settings):
    settings.HARNESS_MCP_CONFIG = ""

    page = client_of(staff("olga", "acme")).get("/admin/catalogue/tools/").content.decode()
    section = page[page.index('id="tool-get_ticket_messages"') :]
    section = section[: section.index("</section>")]

    assert '<span class="kind kind-mcp">mcp</span>' in section
    assert 'title="97a18d0e302fbfb0ccf138e33313a544a540c721bf6dd602633aff4b20081951"' in section
    assert "server tickets is not configured (the tool is off)" in section
    assert "pin unknown" in section
    assert "tickets / get_ticket_messages" in section
    assert "<th>Last drifted call</th>" in section
