"""A real MCP server for the tests: ``python -m tests.support.mcp_server [--http PORT]``.

Its tools exercise what Harness must handle: structured and text results, an image, a tool
error (``isError``), a slow tool that records its cancellation, a tool that kills the server
mid-call, customer data (masking, chain rules), a sink and a result of any size. It writes what
it sees to ``$MCP_TEST_STATE/<tool>.log`` (one JSON line per event), so a test can tell whether
a call arrived, with which ``_meta``, and whether it was cancelled.

Drift: when ``$MCP_TEST_STATE/drift.json`` exists (read at every ``tools/list``), its
``{"tool": "new description"}`` replace the advertised descriptions, ``{"tool": {"input_schema":
{...}, "title": ...}}`` replace any advertised fields (the pinned schema among them) and
``{"tool": null}`` hides a tool.
``$MCP_TEST_START_DELAY`` seconds of sleep before serving play a slow cold start.
With ``--http``, every request must carry ``Authorization: Bearer $MCP_TEST_TOKEN``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, TextContent

# A 1 by 1 pixel PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def _state() -> Path:
    return Path(os.environ["MCP_TEST_STATE"])


def record(tool: str, **event: Any) -> None:
    with (_state() / f"{tool}.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps(event) + "\n")


class TestDesk(MCPServer):
    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        drift_file = _state() / "drift.json"
        if not drift_file.exists():
            return tools
        drift = json.loads(drift_file.read_text(encoding="utf-8"))
        shown = []
        for tool in tools:
            if tool.name in drift:
                change = drift[tool.name]
                if change is None:
                    continue
                fields = change if isinstance(change, dict) else {"description": change}
                tool = tool.model_copy(update=fields)
            shown.append(tool)
        return shown


def build_server() -> MCPServer:
    server = TestDesk("testdesk")

    @server.tool(description="Echo a text back, with the _meta the call carried.")
    async def echo(text: str, ctx: Context) -> dict[str, Any]:
        meta = dict(ctx.request_context.meta or {})
        record("echo", text=text, meta=meta, pid=os.getpid())
        return {"text": text, "meta": meta, "pid": os.getpid()}

    @server.tool(description="Wait the given number of seconds, then answer.")
    async def slow(seconds: float) -> str:
        record("slow", event="started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record("slow", event="cancelled")
            raise
        record("slow", event="finished")
        return f"waited {seconds} s"

    @server.tool(description="Exit the server process in the middle of the call.")
    async def crash() -> str:
        record("crash", event="exiting", pid=os.getpid())
        os._exit(3)

    @server.tool(description="Refuse: the tool reports an error in its result.")
    async def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    @server.tool(
        description="A picture of the ticket's attachment, with a caption.",
        structured_output=False,
    )
    async def picture() -> list[Any]:
        return [
            TextContent(type="text", text="the attachment"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        ]

    @server.tool(description="Look a customer up: name, phone number and e-mail.")
    async def lookup_customer(customer_id: str) -> dict[str, Any]:
        record("lookup_customer", customer_id=customer_id)
        return {
            "customer_id": customer_id,
            "name": "Zhang Wei",
            "phone": "13812345678",
            "email": "zhang.wei@example.com",
        }

    @server.tool(description="Send a message to an outside address.")
    async def mail_out(to: str, body: str) -> dict[str, Any]:
        record("mail_out", to=to, body=body)
        return {"queued": True}

    @server.tool(description="A text of the given number of bytes (a result too large to send).")
    async def big(size: int) -> str:
        record("big", size=size)
        return "x" * size

    @server.tool(description="The names of the server process's environment variables.")
    async def environment_names() -> list[str]:
        return sorted(os.environ)

    @server.tool(description="A tool no Harness file pins: never shown to a model.")
    async def unpinned_admin(command: str) -> str:
        record("unpinned_admin", command=command)
        return "done"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    options = parser.parse_args()
    record("server", event="started", pid=os.getpid())
    # A cold server that takes long to come up (MCP_TEST_START_DELAY seconds).
    time.sleep(float(os.environ.get("MCP_TEST_START_DELAY", "0")))
    server = build_server()
    if not options.http:
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN", "")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
