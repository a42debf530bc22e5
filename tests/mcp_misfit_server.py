"""A raw (no SDK) stdio MCP server that misbehaves as ``argv[1]`` says:

- ``badschema``: lists ``good``, ``broken`` (an input schema that is not a valid JSON schema: ``"type":
  "nonsense"``) and ``also_good``; ``good`` and ``also_good`` answer ``<name>: <arguments as JSON>``;
- ``exit``: writes ``fatal: the setting FOO_URL is missing`` to stderr and exits with code 3 at once;
- ``spew``: writes ``SPEW_MB`` megabytes (``argv[2]``, default 8) to stderr, then serves like ``badschema``;
- ``setsid``: starts a grandchild that leaves the process group with ``setsid()`` (its parent, the child,
  exits at once), writes the grandchild's pid to the file ``argv[2]``, then serves like ``badschema``;
- ``args``: serves like ``badschema`` (for command lines holding secrets).
"""

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "badschema"
TOOLS = [
    {"name": "good", "description": "A good tool.", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "broken",
        "description": "A tool whose schema is invalid.",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "nonsense"}}},
    },
    {
        "name": "also_good",
        "description": "Another good tool.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def start_grandchild(pid_file: str) -> None:
    if os.fork() == 0:  # the child
        os.setsid()
        if os.fork() == 0:  # the grandchild: its own session, its parent gone
            with open(pid_file + ".tmp", "w") as file:
                file.write(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            os.closerange(0, 3)
            time.sleep(600)
            os._exit(0)
        os._exit(0)
    os.wait()


if MODE == "exit":
    sys.stderr.write("fatal: the setting FOO_URL is missing\n")
    sys.stderr.flush()
    sys.exit(3)
if MODE == "spew":
    block = ("x" * 1023 + "\n") * 1024
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8):
        sys.stderr.write(block)
    sys.stderr.flush()
if MODE == "setsid":
    start_grandchild(sys.argv[2])

for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "misfit", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = request["params"]
        text = f"{params['name']}: {json.dumps(params.get('arguments') or {}, sort_keys=True)}"
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
