"""A stdio MCP server is a third party: it gets the environment its configuration names and a
minimal safe set, never Harness's own environment (keys, secrets, database credentials)."""

# The MCP fixtures are imported from tests.tools.mcp_support: test arguments name them.
# ruff: noqa: F811

from tests.tools.mcp_support import (  # noqa: F401  (fixtures)
    call,
    mcp_setup,
    mcp_stdio,
    start_run,
    tool_results,
)


def test_a_stdio_server_does_not_inherit_harnesss_environment(
    acme, agent_dir, mcp_stdio, monkeypatch
):
    monkeypatch.setenv("HARNESS_SECRET_CANARY", "do-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "do-not-leak")

    response = start_run(acme, agent_dir, [[call("mcp_environment_names")]])

    [result] = tool_results(acme, response.json())
    names = result["result"]["result"]
    assert "MCP_TEST_STATE" in names  # what the configuration names
    assert "PATH" in names
    for leaked in ("HARNESS_SECRET_CANARY", "OPENAI_API_KEY", "DJANGO_SECRET_KEY"):
        assert leaked not in names
    configured = set(mcp_stdio.servers["testdesk"]["env"])
    # Besides what the configuration names: the SDK's safe defaults, and the locale variable
    # Python sets for itself at start-up (PEP 538).
    assert set(names) - configured <= {
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LC_CTYPE",
    }
