"""A scripted stdio MCP server without an SDK, for faults real servers show.

Usage: raw_stdio_server.py MODE LOG_FILE

MODE:
  legacy            2025-11-25 only: answers server/discover with -32601, then initialize;
                    declares the tasks capability for tools/call.
  legacy-notasks    legacy, without the tasks capability (so `tasky` cannot be called).
  modern            2026-07-28 (server/discover) without tools.listChanged.
  modern-noack      2026-07-28 advertising tools.listChanged; never answers subscriptions/listen.
Every received method is appended to LOG_FILE, one per line.

Tools: `ok` (text), `tasky` (execution.taskSupport = required), and `big`, `badutf8`, `deep`,
whose answers are lines a JSON-RPC reader must drop: over 16 MiB, invalid UTF-8, nested
deeper than serde's recursion limit.

`tasky` runs as a task: in legacy mode only when called with a `task` parameter (2025-11-25
augmentation: `tasks/get`, then `tasks/result`), in the modern modes always (the 2026-07-28
tasks extension: the result comes with `tasks/get`). The task completes on its second poll.
"""
import json
import sys

mode, log_path = sys.argv[1], sys.argv[2]
LEGACY = mode.startswith("legacy")
log = open(log_path, "a")
out = sys.stdout.buffer


def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


def result(mid, value):
    if not LEGACY:
        value = dict(value, resultType="complete")
    send({"jsonrpc": "2.0", "id": mid, "result": value})


TOOLS = [
    {"name": "ok", "inputSchema": {"type": "object"}},
    {"name": "tasky", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    {"name": "big", "inputSchema": {"type": "object"}},
    {"name": "badutf8", "inputSchema": {"type": "object"}},
    {"name": "deep", "inputSchema": {"type": "object"}},
]

TASK = {"taskId": "task-1", "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "ttlMs": 60000,
        "pollInterval": 10, "pollIntervalMs": 10}
polls = 0

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    log.write((method or "<response>") + "\n")
    log.flush()
    if method == "server/discover" and not LEGACY:
        tools = {"listChanged": True} if mode == "modern-noack" else {}
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": tools}, "ttlMs": 0, "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "1"}}}})
    elif method == "initialize":
        capabilities = {"tools": {}}
        if mode == "legacy":
            capabilities["tasks"] = {"requests": {"tools": {"call": {}}}}
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "serverInfo": {"name": "raw", "version": "1"}}})
    elif method == "subscriptions/listen":
        pass  # never acknowledged
    elif method == "tools/list":
        result(mid, {"tools": TOOLS})
    elif method == "tools/call":
        name = msg["params"]["name"]
        head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(mid).encode() + b', "result": '
        if name == "tasky" and LEGACY:
            if "task" in msg["params"]:
                result(mid, {"task": dict(TASK, status="working")})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {
                    "code": -32601, "message": "tasky runs only as a task"}})
        elif name == "tasky":
            send({"jsonrpc": "2.0", "id": mid, "result": dict(
                TASK, status="working", resultType="task")})
        elif name == "big":
            text = b"x" * (17 * 1024 * 1024)
            out.write(head + b'{"content": [{"type": "text", "text": "' + text + b'"}]}}\n')
            out.flush()
        elif name == "badutf8":
            out.write(head + b'{"content": [{"type": "text", "text": "\xff\xfe"}]}}\n')
            out.flush()
        elif name == "deep":
            out.write(head + b'{"content": [], "structuredContent": ' + b"[" * 300 + b"]" * 300 + b"}}\n")
            out.flush()
        else:
            result(mid, {"content": [{"type": "text", "text": "fine"}]})
    elif method == "tasks/get":
        polls += 1
        status = "completed" if polls >= 2 else "working"
        task = dict(TASK, status=status, statusMessage=f"poll {polls}")
        if status == "completed" and not LEGACY:
            task["result"] = {"content": [{"type": "text", "text": "fine as a task"}]}
        result(mid, task)
    elif method == "tasks/result":
        result(mid, {"content": [{"type": "text", "text": "fine as a task"}]})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
