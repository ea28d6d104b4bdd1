"""The catalogue in a real browser, on the demo: an operator goes from the dashboard to the
agents, the tools (arguments as a table, who may call each in their tenant, the MCP tool's
pin checked against the running demo server) and the MCP servers."""

from __future__ import annotations

import pytest

from harness.demo import write_demo_mcp_config
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium


@pytest.fixture
def demo_mcp(demo, settings, tmp_path):
    """The demo's MCP configuration as ``load_demo`` writes it: the ticket desk over stdio,
    reading this test's database."""
    from tools.mcp.client import reset_pool

    settings.HARNESS_MCP_CONFIG = str(write_demo_mcp_config(tmp_path / "demo-mcp-servers.json"))
    settings.HARNESS_MCP_CONNECT_TIMEOUT_S = 120  # a busy machine starts a server slowly
    yield
    reset_pool()


def test_an_operator_reads_the_catalogue_of_the_demo(demo_mcp, operator, live_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(180_000)
        login(page, live_server.url, *operator, "/admin/")
        page.click(".dash-catalogue >> text=Agents")
        page.wait_for_url("**/admin/catalogue/agents/")
        agent = page.locator("#agent-ticket-assistant").inner_text()
        agent_tools = page.locator("#agent-ticket-assistant .tool-list a").all_inner_texts()
        save(page, None, "catalogue-agents.png")

        page.click(".catalogue-tabs >> text=Tools")
        page.wait_for_url("**/admin/catalogue/tools/")
        update_rows = page.locator("#tool-update_ticket table.arguments tbody tr").all_inner_texts()
        update_facts = page.locator("#tool-update_ticket table.facts").inner_text()
        mcp_tool = page.locator("#tool-get_ticket_messages").inner_text()
        page.locator("#tool-update_ticket").scroll_into_view_if_needed()
        save(page, None, "catalogue-tools.png")

        page.click(".catalogue-tabs >> text=MCP servers")
        page.wait_for_url("**/admin/catalogue/mcp/")
        server = page.locator("#server-tickets td").all_inner_texts()
        save(page, None, "catalogue-mcp.png")
        browser.close()

    assert "react" in agent
    assert "steps 8" in agent
    assert "harness/agents/ticket-assistant.json" in agent
    assert "get_ticket_messages" in agent_tools  # its server is configured: it is on
    assert len(agent_tools) == 7
    first = update_rows[0].split("\t")
    assert first[:3] == ["ticket_id", "string", "required"]
    assert "ticket:write" in update_facts
    assert "acme: role:member allow ticket:write" in update_facts
    assert "globex" not in update_facts  # olga is granted acme only
    assert "pin matches" in mcp_tool
    assert "tickets / get_ticket_messages" in mcp_tool
    name, configured, connected, offered, pinned, drift, last = server
    assert "stdio" in name
    assert configured == "yes"
    assert connected == "yes"
    assert "get_ticket" in offered
    assert "get_ticket_messages ✓" in offered
    assert pinned.strip() == "get_ticket_messages"
    assert drift == "none"
    assert last == "none recorded"
