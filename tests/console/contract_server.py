"""A stand-in for the admin API's operations endpoints (stats, devices, a user's sync log,
rejected writes, settings, delete and revoke-sessions), answering with fixed data in exactly
the shapes ferry-server sends (AdminOperationsRoutes+JSON.swift, SyncTelemetry's sync log
details, AdminSettings); the console's own files are fetched from a real ferry-server. It lets
the browser test check what a real server cannot easily be made to send: data that looks like
markup, a hundred entries to page through, every kind of sync log entry and rejected write.

    python contract_server.py FERRY_SERVER_URL [--older]   # prints the port it listens on

With `older`, it is a server older than the console instead: none of those endpoints (a 404
without the API's error, as for a route the server does not have), and `GET logs`.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

TOKEN = "contract-token-of-32-bytes-or-more-like-a-real-one"
USERS = [
    {"id": "6571f0a1c2d3e4f5a6b7c8d9", "identities": [{"provider_type": "anon-user", "id": "6571f0a1c2d3e4f5a6b7c8d9"}], "disabled": False},
    {"id": "6571f0a1c2d3e4f5a6b7c8da", "identities": [{"provider_type": "local-userpass", "id": "ada@example.com"}], "disabled": True},
    # Markup in data must show as text.
    {"id": "<img src=x onerror=alert(1)>", "identities": [{"provider_type": "custom-token", "id": "<b>bold</b>"}], "disabled": False},
]
KINDS = ["connection_opened", "session_bound", "subscription_changed", "upload", "compensating_write", "upload",
         "client_reset", "error", "session_unbound", "connection_closed"]
SDK = "ferry/0.1.0 linux-x86_64"
OPERATIONS = ["create", "update", "list_update", "erase"]


def write_filter_reason(pk: str) -> str:
    return f'write to "{pk}" in table "Item" was denied by write filter in role "owner-read-write"'


def query_view_reason(pk: str) -> str:
    return f'write to "{pk}" in table "Item" not allowed; object is outside of the current query view'


def entry_details(kind: str, i: int) -> tuple[str, dict[str, Any]]:
    """The message and details of a sync log entry of `kind`, as SyncTelemetry records them."""
    session = 1 + i // 10
    pk = f"6572000000000000000{i:05d}"
    if kind == "connection_opened":
        return f"connection opened by {SDK}", {"sdk": SDK}
    if kind == "connection_closed":
        return "connection closed: the client closed it", {"reason": "the client closed it", "bytes_up": 4096 + i, "bytes_down": 1 << 20}
    if kind == "session_bound":
        return f"session {session} bound to client file 12", {"session": session, "client_file": 12, "new_client_file": False,
                                                             "server_version": 40 + i}
    if kind == "session_unbound":
        return f"session {session} unbound: the client ended it", {"session": session, "reason": "the client ended it"}
    if kind == "subscription_changed":
        return (f"subscription set {i} of session {session}: complete",
                {"session": session, "version": i, "state": "complete", "error": None,
                 "queries": [{"name": "simple-items", "object_type": "Item", "query": "complexity <= 4"},
                             {"name": "mine", "object_type": "Item", "query": 'ownerId == "<b>me</b>"'}]})
    if kind == "upload":
        lines = [{"client_version": 7 + i, "object_type": "Item", "operation": op, "primary_key": pk, "count": 3 if op == "update" else 1}
                 for op in OPERATIONS]
        return (f"upload of 1 changeset(s), 6 instruction(s) in session {session}",
                {"session": session, "changesets": lines, "lines_omitted": 0})
    if kind == "compensating_write":
        reason = write_filter_reason(pk)
        return reason, {"object_type": "Item", "primary_key": pk, "reason": reason, "rule": "write_filter", "role": "owner-read-write"}
    if kind == "client_reset":
        return "the client's file is unknown to the server", {"session": session, "code": 208, "trigger": "unknown_client_file"}
    return "error 212: the client sent a bad message", {"session": session, "code": 212}


def sync_log(user: str) -> list[dict[str, Any]]:
    entries = []
    for i in range(120):
        kind = KINDS[i % len(KINDS)]
        message, details = entry_details(kind, i)
        entries.append({"id": 1000 - i, "time": f"2026-11-26T12:{59 - i // 2:02d}:{(i % 2) * 30:02d}.000Z", "kind": kind,
                        "user_id": user, "node": "node-a", "connection_id": 3 + i // 10, "message": message, "details": details})
    return entries


def rejected(i: int) -> dict[str, Any]:
    pk = f"65720000000000000000{i:04d}"
    rule = ["query_view", "write_filter", "key_taken"][i % 3]
    reason = {"query_view": query_view_reason(pk), "write_filter": write_filter_reason(pk),
              "key_taken": f'write to "{pk}" in table "Item" not allowed; primary key already in use'}[rule]
    return {"id": 500 - i, "time": f"2026-11-26T13:{59 - i:02d}:00.000Z", "user_id": USERS[0]["id"], "object_type": "Item",
            "primary_key": pk, "reason": reason, "rule": rule, "role": "owner-read-write" if rule == "write_filter" else None}


REJECTED = [rejected(i) for i in range(60)]

SETTINGS = {
    "app_name": "item-app",
    "app_id": "item-app-seeds",
    "queryable_fields": ["complexity", "ownerId"],
    "indexed_queryable_fields": [],
    "roles": [{"collection": "Item", "name": "owner-read-write", "apply_when": {},
               "document_filters": {"read": {"ownerId": "%%user.id"}, "write": {"ownerId": "%%user.id"}},
               "read": True, "write": True, "insert": True, "delete": True, "search": True}],
    "max_offline_days": 30,
    "recovery_mode": "recover_unsynced_changes",
    "development_mode": False,
    "collections": ["Item"],
    "auth_providers": [{"name": "anon-user", "type": "anon-user", "disabled": False},
                       {"name": "local-userpass", "type": "local-userpass", "disabled": True}],
    "files": [{"path": "root_config.json", "content": '{ "name": "item-app", "note": "<script>alert(1)</script>" }\n'},
              {"path": "sync/config.json", "content": '{\n  "type": "flexible",\n  "client_max_offline_days": 30\n}\n'}],
}

# A user another admin deleted meanwhile: its actions get the API's own 404 (with its error).
GONE = USERS[1]["id"]


# The in-memory event log (`GET logs`) of an older server, as SyncHub and the admin routes record it.
PK = "657200000000000000000001"
EVENT_LOG = [
    {"time": "2026-11-26T12:00:00Z", "kind": "sync_enabled", "user_id": None, "message": "sync enabled by an admin; known client files were forgotten"},
    {"time": "2026-11-26T12:01:00Z", "kind": "session_error", "user_id": USERS[0]["id"], "message": "error 212: the client sent a bad message"},
    {"time": "2026-11-26T12:02:00Z", "kind": "compensating_write", "user_id": USERS[0]["id"],
     "message": '"Item": { "%s": "%s" }' % (PK, write_filter_reason(PK).replace('"', '\\"'))},
]


class State:
    def __init__(self, upstream: str, older: bool) -> None:
        self.upstream = upstream
        # An older server: none of the operations endpoints (404 without the API's error), `GET logs`.
        self.older = older
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
            parts = path.split("/")
            if state.older:
                if method == "GET" and path == "sync":
                    return self._json({"sync_enabled": True, "connections": 3})
                if method == "GET" and path == "users":
                    return self._json(USERS)
                if method == "GET" and path == "logs":
                    return self._json({"entries": EVENT_LOG[-int(q.get("limit", 100)):]})
                if method == "POST" and len(parts) == 3 and parts[0] == "users" and parts[2] in ("disable", "enable"):
                    return self._send(204)
                return self._send(404, b"")
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
                    {"user_id": USERS[0]["id"], "node": "node-a", "connection_id": 3, "client_file": 12,
                     "sdk": SDK, "connected_since": "2026-11-26T13:02:00.000Z",
                     "bytes_up": 123456, "bytes_down": 9876543, "sessions": 1},
                    {"user_id": USERS[2]["id"], "node": "node-b", "connection_id": 4, "client_file": None,
                     "sdk": "<script>alert(1)</script>", "connected_since": "2026-11-26T11:00:00.000Z",
                     "bytes_up": 512, "bytes_down": 2048, "sessions": 2}]})
            if method == "GET" and path == "rejected-writes":
                entries = [r for r in REJECTED if not q.get("user") or r["user_id"] == q["user"]]
                if "before" in q:
                    entries = [r for r in entries if r["id"] < int(q["before"])]
                page = entries[: int(q.get("limit", 100))]
                more = len(entries) > len(page)
                return self._json({"entries": page, "next": page[-1]["id"] if more else None})
            if method == "GET" and path == "settings":
                return self._json(SETTINGS)
            if len(parts) == 3 and parts[0] == "users" and parts[2] == "sync-log" and method == "GET":
                # As the server: a user without entries (or unknown) has an empty log.
                entries = sync_log(parts[1]) if any(u["id"] == parts[1] for u in USERS) else []
                kinds = [k for k in q.get("kind", "").split(",") if k]
                if kinds:
                    entries = [e for e in entries if e["kind"] in kinds]
                if "before" in q:
                    entries = [e for e in entries if e["id"] < int(q["before"])]
                page = entries[: int(q.get("limit", 100))]
                more = len(entries) > len(page)
                return self._json({"entries": page, "next": page[-1]["id"] if more else None})
            if len(parts) >= 2 and parts[0] == "users" and parts[1] == GONE and method in ("POST", "DELETE") \
                    and (len(parts) == 2 or parts[2] == "revoke-sessions"):
                return self._json({"error": f"no user {GONE}", "error_code": "UserNotFound"}, 404)
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


def start(upstream: str, older: bool = False) -> tuple[ThreadingHTTPServer, State]:
    state = State(upstream, older)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, state


if __name__ == "__main__":
    server, _ = start(sys.argv[1], older="--older" in sys.argv[2:])
    print(server.server_address[1], flush=True)
    threading.Event().wait()
