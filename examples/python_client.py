#!/usr/bin/env python3
"""A client of the Sandbox Sessions companion server that is not VS Code: Python's standard library only.

It starts the server (`sandbox-sessions server --stdio` by default, or the command given as arguments),
creates a local sandbox, runs a command in it through the sandbox's gateway (plain HTTP + bearer token),
copies the workspace out and packs it into a Session Bundle, then closes the sandbox with Drain.

    python3 examples/python_client.py                       # uses `sandbox-sessions` on PATH
    python3 examples/python_client.py node dist/server.js   # or any command that runs the CLI
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import urllib.request


class Companion:
    """JSON-RPC 2.0 over stdio with Content-Length framing (the LSP base protocol)."""

    def __init__(self, command):
        self.proc = subprocess.Popen(command + ["server", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        while True:
            message = self._read()
            if message.get("id") == self.next_id:
                if "error" in message:
                    error = message["error"]
                    raise RuntimeError(f"{method}: {error['message']} ({error.get('data', {}).get('code')})")
                return message["result"]
            # Anything else is a notification ($/progress, sandboxes/changed): ignored here.

    def _read(self):
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the companion server exited")
            if line in (b"\r\n", b"\n"):
                break
            key, _, value = line.decode("ascii").partition(":")
            if key.strip().lower() == "content-length":
                length = int(value)
        return json.loads(self.proc.stdout.read(length))

    def close(self):
        self.request("shutdown", {})
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def gateway(connection, method, suffix, body=None):
    """One call to the sandbox's Runtime access API."""
    request = urllib.request.Request(
        connection["endpoint"]["url"] + suffix,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + connection["token"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def main():
    command = sys.argv[1:] or ["sandbox-sessions"]
    companion = Companion(command)
    try:
        info = companion.request("initialize", {"clientName": "python-example", "protocolVersion": 1})
        print(f"companion server {info['serverVersion']} on Node {info['nodeVersion']}")

        sandbox = companion.request("sandboxes/create", {"spec": {"provider": "local", "runtime": "process"}})["sandbox"]
        print(f"sandbox {sandbox['ref']['name']} is {sandbox['phase']}")
        connection = companion.request("sandboxes/open", {"ref": sandbox["ref"]})

        result = gateway(connection, "POST", "/operations:execute",
                         {"command": {"shell": "printf 'hello from python\\n' > hello.txt && uname -s"}})["command"]
        print(f"command exit {result['exitCode']}: {base64.b64decode(result.get('stdout', '')).decode().strip()}")

        with tempfile.TemporaryDirectory() as tmp:
            workspace, state = os.path.join(tmp, "workspace"), os.path.join(tmp, "state")
            os.makedirs(workspace)
            os.makedirs(state)
            for entry in gateway(connection, "GET", "/files?limit=1000")["entries"]:
                if not entry.get("directory"):
                    read = gateway(connection, "GET", "/files/" + urllib.request.quote(entry["path"]))
                    with open(os.path.join(workspace, entry["path"]), "wb") as f:
                        f.write(base64.b64decode(read["contents"] or ""))
            bundle = os.path.join(tmp, "example.tar.zst")
            packed = companion.request("bundles/pack", {"stateRoot": state, "workspaceRoot": workspace,
                                                        "destination": bundle, "sessionId": "python-example"})
            artifact = packed["artifact"]
            print(f"packed {artifact['entryCount']} entries into {artifact['compressedBytes']} bytes, {artifact['archiveDigest']}")

        closed = companion.request("sandboxes/terminate", {"ref": sandbox["ref"], "mode": "Drain"})["sandbox"]
        print(f"sandbox {closed['ref']['name']} is {closed['phase']}")
    finally:
        companion.close()


if __name__ == "__main__":
    main()
