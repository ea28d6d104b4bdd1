"""An MCP result larger than the SDK reads (issue 21, Info): over Streamable HTTP the SDK
stops at 1 MiB per server-sent event. That used to be ``mcp_unavailable``, the session
dropped and the call tried three times (11 to 16 s). Now it is a ``result_too_large`` tool error
at once, not retried, and the session goes on serving the next call."""

# The MCP fixtures are imported from tests.tools.mcp_support: test arguments name them.
# ruff: noqa: F811

import time

from tests.tools.mcp_support import (  # noqa: F401  (fixtures)
    call,
    mcp_http,
    mcp_setup,
    start_run,
    tool_results,
    trace_of,
)
from tools.mcp.client import MAX_RESULT_BYTES, get_pool

TOO_LARGE = MAX_RESULT_BYTES + 64 * 1024


def test_a_result_over_the_limit_is_result_too_large_at_once_and_the_session_stays(
    acme, agent_dir, mcp_http
):
    began = time.monotonic()
    response = start_run(
        acme,
        agent_dir,
        [
            [call("mcp_echo", text="before")],
            [call("mcp_big", size=TOO_LARGE)],
            [call("mcp_echo", text="after")],
        ],
    )
    elapsed = time.monotonic() - began
    assert response.status_code == 200, response.content
    run = response.json()

    before, big, after = tool_results(acme, run)
    assert big["ok"] is False
    assert big["error"]["code"] == "result_too_large"
    assert str(MAX_RESULT_BYTES) in big["error"]["message"]
    assert big["error"]["details"]["limit_bytes"] == MAX_RESULT_BYTES
    assert after["ok"] is True
    assert after["result"]["text"] == "after"
    # One call reached the server (not retried), and the session was never dropped.
    assert mcp_http.log("big") == [{"size": TOO_LARGE}]
    assert get_pool().connections["testdesk"].connects == 1
    assert [event["pid"] for event in mcp_http.log("echo")] == [before["result"]["pid"]] * 2
    [span] = [
        s
        for s in trace_of(acme, run)["spans"]
        if s["kind"] == "tool_call" and s["name"] == "mcp_big"
    ]
    assert span["attributes"]["error_code"] == "result_too_large"
    assert span["attributes"]["attempts"] == 1
    assert span["duration_ms"] < 1500  # was 11 to 16 s over three attempts
    assert elapsed < 10


def test_a_result_under_the_limit_still_arrives_whole(acme, agent_dir, mcp_http):
    size = MAX_RESULT_BYTES // 3  # sent twice: as text content and as structured content
    response = start_run(acme, agent_dir, [[call("mcp_big", size=size)]])

    [result] = tool_results(acme, response.json())
    assert result["ok"] is True, result
