"""A stand-in for the admin API's newer endpoints (stats, devices, a user's sync log, rejected
writes, settings, delete and revoke-sessions), answering with fixed data in the documented
shapes; the console's own files are fetched from a real ferry-server. It lets the browser test
check how the console renders those endpoints whatever the server under test implements.

    python contract_server.py FERRY_SERVER_URL   # prints the port it listens on
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

TOKEN = "contract-token"
USERS = [
    {"id": "6571f0a1c2d3e4f5a6b7c8d9", "identities": [{"provider_type": "anon-user", "id": "6571f0a1c2d3e4f5a6b7c8d9"}], "disabled": False},
    {"id": "6571f0a1c2d3e4f5a6b7c8da", "identities": [{"provider_type": "local-userpass", "id": "ada@example.com"}], "disabled": True},
    # Markup in data must show as text.
    {"id": "<img src=x onerror=alert(1)>", "identities": [{"provider_type": "custom-token", "id": "<b>bold</b>"}], "disabled": False},
]
KINDS = ["connection_opened", "session_bound", "subscription_changed", "upload", "compensating_write", "upload",
         "client_reset", "error", "session_unbound", "connection_closed"]


def sync_log(user: str) -> list[dict[str, Any]]:
    entries = []
    for i in range(120):
        kind = KINDS[i % len(KINDS)]
        details: dict[str, Any] = {}
        if kind == "upload":
            details = {"changesets": [{"object_type": "Item", "operation": "insert", "primary_key": f"pk{i}", "count": 1}]}
        elif kind == "compensating_write":
            details = {"writes": [{"object_type": "Item", "primary_key": f"pk{i}",
                                   "reason": f'write to "pk{i}" in table "Item" was denied by write filter in role "owner-read-write"'}]}
        entries.append({"id": 1000 - i, "time": f"2026-11-26T12:{59 - i // 2:02d}:{(i % 2) * 30:02d}Z", "kind": kind,
                        "user_id": user, "node": "node-a", "connection_id": f"c{i // 10}",
                        "message": f"{kind.replace('_', ' ')} #{i}", "details": details})
    return entries


REJECTED = [{"id": 500 - i, "time": f"2026-11-26T13:{59 - i:02d}:00Z", "user_id": USERS[0]["id"], "object_type": "Item",
             "primary_key": f"65720000000000000000{i:04d}",
             "reason": (f'write to "65720000000000000000{i:04d}" in table "Item" was denied by write filter in role "owner-read-write"'
                        if i % 2 else f'write to "65720000000000000000{i:04d}" in table "Item" not allowed; object is outside of the current query view'),
             "rule": "write filter" if i % 2 else "query view", "role": "owner-read-write" if i % 2 else None}
            for i in range(60)]

SETTINGS = {
    "app_name": "item-app",
    "queryable_fields": ["complexity", "ownerId"],
    "roles": [{"name": "owner-read-write", "collection": "Item", "apply_when": {},
               "read": {"ownerId": "%%user.id"}, "write": {"ownerId": "%%user.id"}, "insert": True, "delete": True}],
    "max_offline_days": 30,
    "recovery_mode": True,
    "files": [{"path": "sync/config.json", "content": '{\n  "type": "flexible",\n  "client_max_offline_days": 30\n}\n'},
              {"path": "root_config.json", "content": '{ "name": "item-app", "note": "<script>alert(1)</script>" }\n'}],
}


class State:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.uploads = 0
        self.calls: list[str] = []  # "METHOD path" of every admin API call
        self.queries: list[dict[str, str]] = []  # and its query parameters


def handler(state: State) -> type:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Optional[bytes] = None, content_type: str = "application/json",
                  headers: Optional[dict[str, str]] = None) -> None:
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if body is not None:
                self.wfile.write(body)

        def _json(self, value: Any, status: int = 200) -> None:
            self._send(status, json.dumps(value).encode())

        def _route(self, method: str) -> None:
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path.startswith("/admin"):
                with urllib.request.urlopen(state.upstream + url.path) as r:
                    keep = {k: v for k, v in r.headers.items() if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server")}
                    body = r.read()
                self._send(200, body, keep.pop("Content-Type"), keep)
                return
            if not url.path.startswith("/api/admin/v1/"):
                return self._send(404, b"")
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._json({"error": "invalid admin token", "error_code": "InvalidSession"}, 401)
            path = url.path[len("/api/admin/v1/"):]
            with state.lock:
                state.calls.append(f"{method} {path}")
                state.queries.append(q)
            if method == "GET" and path == "stats":
                with state.lock:
                    state.uploads += 7
                    n = state.uploads
                return self._json({"node": "node-a", "sync_enabled": True, "connections": 3, "sessions": 4,
                                   "uploads_total": n, "downloads_total": 2 * n, "upload_bytes_total": 900 * n,
                                   "download_bytes_total": 2000 * n, "compensating_writes_total": 60,
                                   "client_resets_total": 2, "bootstraps_total": 5})
            if method == "GET" and path == "sync":
                return self._json({"sync_enabled": True, "connections": 3})
            if method == "GET" and path == "users":
                return self._json(USERS)
            if method == "GET" and path == "devices":
                return self._json({"devices": [
                    {"user_id": USERS[0]["id"], "node": "node-a", "connection_id": "c1", "client_file": 12,
                     "sdk": "ferry-python/0.9 libferry/0.9.0 (Linux x86_64)", "connected_since": "2026-11-26T13:02:00Z",
                     "bytes_up": 123456, "bytes_down": 9876543, "sessions": 1},
                    {"user_id": USERS[2]["id"], "node": "node-b", "connection_id": "c2", "client_file": 13,
                     "sdk": "<script>alert(1)</script>", "connected_since": "2026-11-26T11:00:00Z",
                     "bytes_up": 512, "bytes_down": 2048, "sessions": 2}]})
            if method == "GET" and path == "rejected-writes":
                entries = [r for r in REJECTED if not q.get("user") or r["user_id"] == q["user"]]
                if "before" in q:
                    entries = [r for r in entries if r["id"] < int(q["before"])]
                page = entries[: int(q.get("limit", 50))]
                more = len(entries) > len(page)
                return self._json({"entries": page, "next": page[-1]["id"] if more else None})
            if method == "GET" and path == "settings":
                return self._json(SETTINGS)
            parts = path.split("/")
            if len(parts) == 3 and parts[0] == "users" and parts[2] == "sync-log" and method == "GET":
                if parts[1] == "ghost":
                    return self._json({"error": "no user with id ghost", "error_code": "UserNotFound"}, 404)
                entries = sync_log(parts[1])
                kinds = [k for k in q.get("kind", "").split(",") if k]
                if kinds:
                    entries = [e for e in entries if e["kind"] in kinds]
                if "before" in q:
                    entries = [e for e in entries if e["id"] < int(q["before"])]
                page = entries[: int(q.get("limit", 50))]
                more = len(entries) > len(page)
                return self._json({"entries": page, "next": page[-1]["id"] if more else None})
            if method == "POST" and len(parts) == 3 and parts[0] == "users" and parts[2] in ("disable", "enable", "revoke-sessions"):
                return self._send(204)
            if method == "DELETE" and len(parts) == 2 and parts[0] == "users":
                return self._send(204)
            return self._send(404, b"")  # as Hummingbird answers a route it does not have

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

    return Handler


def start(upstream: str) -> tuple[ThreadingHTTPServer, State]:
    state = State(upstream)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, state


if __name__ == "__main__":
    server, _ = start(sys.argv[1])
    print(server.server_address[1], flush=True)
    threading.Event().wait()
