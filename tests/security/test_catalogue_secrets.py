"""The console's catalogue of MCP servers shows where a server is, never what it is sent:
no header, no environment value, no user, password or query of its URL; a secret is named,
not shown. (Any staff user may open the catalogue: it must hold nothing secret.)"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.test import Client


def test_the_mcp_page_never_shows_a_servers_headers_environment_or_url_credentials(
    demo, settings, tmp_path
):
    config = tmp_path / "mcp.json"
    servers = {
        "crm": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cr3t"}},
        "erp": {"url": "https://svc:pa55word@127.0.0.1:9/mcp?token=t0ken"},
        "desk": {
            "command": "/nonexistent/srv",
            "env": {"TOKEN": "${secret:DESK_TOKEN}", "PASSWORD": "hunter2"},
        },
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    settings.HARNESS_MCP_CONFIG = str(config)
    settings.HARNESS_MCP_CONNECT_TIMEOUT_S = 1
    staff = get_user_model().objects.create_user("gus", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)

    page = client.get("/admin/catalogue/mcp/").content.decode()

    assert "http://127.0.0.1:9/mcp" in page
    assert "https://127.0.0.1:9/mcp" in page
    assert "/nonexistent/srv" in page
    assert "secrets: DESK_TOKEN" in page
    for secret in ("s3cr3t", "pa55word", "svc:", "t0ken", "hunter2"):
        assert secret not in page
