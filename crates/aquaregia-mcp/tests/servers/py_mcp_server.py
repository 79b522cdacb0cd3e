#!/usr/bin/env python3
"""A real MCP server built on the PyPI `mcp` package (2.x, `MCPServer`), used by
aquaregia's interoperability tests.

Run with the venv python from scripts/test-deps.sh (`$AQUAREGIA_PYTHON`):

    $AQUAREGIA_PYTHON py_mcp_server.py               # stdio
    $AQUAREGIA_PYTHON py_mcp_server.py --http PORT   # Streamable HTTP on 127.0.0.1:PORT/mcp

The SDK serves both protocol eras on one server:
- handshake era (`initialize`, protocol 2024-11-05 .. 2025-11-25), where
  list_changed notifications go out as plain `notifications/tools/list_changed`;
- 2026-07-28 (`server/discover` + per-request `_meta` envelope), where
  list_changed is only delivered on a `subscriptions/listen` stream.

Tools:
- speak(text)                -> audio content block (a tiny WAV, audio/wav)
- structured_weather(city)   -> structuredContent {"city", "temperature_c": 21} + text
- add(a, b)                  -> text of the sum; its description is $PY_MCP_ADD_DESCRIPTION
                                when set (a server whose tool text changes between runs)
- enable_extra()             -> registers `extra_tool` and announces tools/list_changed
- fail()                     -> raises; the client sees an isError result
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import Annotated, TypedDict

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Audio, Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

server = MCPServer(
    "py-mcp-server",
    version="1.0.0",
    instructions="aquaregia test server (Python mcp SDK)",
    log_level="WARNING",
)

# MCPServer never advertises `tools.listChanged` on the handshake era (it does
# not pass NotificationOptions); default the options so stdio and HTTP both
# advertise it. On 2026-07-28 the flag is derived from `subscriptions/listen`.
_lowlevel = server._lowlevel_server  # noqa: SLF001 - no public knob for this
_create_init_options = _lowlevel.create_initialization_options


def _init_options_with_list_changed(notification_options=None, *args, **kwargs):
    return _create_init_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


_lowlevel.create_initialization_options = _init_options_with_list_changed  # type: ignore[method-assign]


def _tiny_wav() -> bytes:
    """A valid 8 kHz mono 8-bit PCM WAV with four samples of silence."""
    samples = b"\x80\x80\x80\x80"
    fmt = struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, 8000, 8000, 1, 8)
    data = struct.pack("<4sI", b"data", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", 4 + len(fmt) + len(data)) + b"WAVE" + fmt + data


@server.tool(description="Speak the text; returns a short WAV clip.")
def speak(text: str = "hello") -> Audio:
    return Audio(data=_tiny_wav(), format="wav")


class Weather(TypedDict):
    city: str
    temperature_c: int


@server.tool(description="Current weather for a city, as structured output.")
def structured_weather(city: str) -> Annotated[CallToolResult, Weather]:
    return CallToolResult(
        content=[TextContent(type="text", text=f"It is 21°C in {city}.")],
        structured_content={"city": city, "temperature_c": 21},
    )


@server.tool(description=os.environ.get("PY_MCP_ADD_DESCRIPTION", "Add two integers."), structured_output=False)
def add(a: int, b: int) -> str:
    return str(a + b)


def extra_tool() -> str:
    return "extra tool called"


@server.tool(description="Register `extra_tool` and send tools/list_changed.", structured_output=False)
async def enable_extra(ctx: Context) -> str:
    if server._tool_manager.get_tool("extra_tool") is None:  # noqa: SLF001
        server.add_tool(extra_tool, description="A tool added at runtime by enable_extra.", structured_output=False)
    # 2026-07-28: publish to `subscriptions/listen` streams.
    await ctx.notify_tools_changed()
    # Handshake era: plain notification on the connection (the SDK drops it on
    # 2026-07-28 connections, where it would be unrequested).
    await ctx.session.send_tool_list_changed()
    return "extra_tool enabled"


@server.tool(description="Always fails.", structured_output=False)
def fail() -> str:
    # ToolError's message reaches the client verbatim (isError: true); any other
    # exception becomes "Error executing tool fail" plus a traceback on stderr.
    raise ToolError("this tool always fails")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        print(f"py_mcp_server: http://127.0.0.1:{args.http}/mcp", file=sys.stderr, flush=True)
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
