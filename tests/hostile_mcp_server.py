"""A raw (no SDK) stdio MCP server that answers tools/call with what argv[1] says:
``deep`` (structuredContent nested 300 levels), ``huge`` (one 40 MB text block)."""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "deep"


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "tools": [
                        {"name": "get", "description": "get", "inputSchema": {"type": "object", "properties": {}}}
                    ]
                },
            }
        )
    elif method == "tools/call":
        if MODE == "deep":
            value: object = "bottom"
            for _ in range(300):
                value = {"a": value}
            result = {"content": [], "structuredContent": value}
        else:
            result = {"content": [{"type": "text", "text": "x" * 40_000_000}]}
        text = json.dumps(result) if MODE != "deep" else None
        if MODE == "deep":
            # json.dumps of 300 levels is fine in Python; build it by hand to be sure
            body = '{"a":' * 300 + '"bottom"' + "}" * 300
            text = '{"content":[],"structuredContent":' + body + "}"
        sys.stdout.write('{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"result":' + text + "}\n")
        sys.stdout.flush()
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
