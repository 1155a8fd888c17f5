#!/usr/bin/env python3
"""statusd: the build-farm status API. Reads /app/statusd/statusd.toml at start.

GET /status          counts of builds per state and the newest build per pipeline
GET /builds/<id>     one build
Every request must carry "Authorization: Bearer <token>" (the token file named by the config).
"""

import json
import sqlite3
import sys
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONFIG = Path("/app/statusd/statusd.toml")
VERSION = "statusd/1.4.2"


def load_config():
    with CONFIG.open("rb") as f:
        cfg = tomllib.load(f)
    server, storage, auth = cfg["server"], cfg["storage"], cfg["auth"]
    if not isinstance(server["port"], int) or not 1024 <= server["port"] <= 65535:
        port = server["port"]
        raise SystemExit(f"statusd: server.port must be an integer 1024-65535, got {port!r}")
    db = Path(storage["database"])
    if not db.is_file():
        raise SystemExit(f"statusd: storage.database {db} does not exist")
    token = Path(auth["token_file"]).read_text().strip()
    if len(token) < 16:
        raise SystemExit("statusd: the API token is too short")
    return server["bind"], server["port"], db, token, storage.get("pipelines", [])


BIND, PORT, DB, TOKEN, PIPELINES = load_config()


def query(sql, args=()):
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


class Handler(BaseHTTPRequestHandler):
    server_version = VERSION

    def _send(self, status, payload):
        body = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(401, {"error": "unauthorized"})
        path = self.path.split("?", 1)[0]
        if path == "/status":
            states = dict(query("SELECT state, COUNT(*) FROM builds GROUP BY state"))
            latest = {}
            for pipeline in PIPELINES:
                row = query(
                    "SELECT id, state FROM builds WHERE pipeline = ? ORDER BY started DESC LIMIT 1",
                    (pipeline,),
                )
                latest[pipeline] = {"id": row[0][0], "state": row[0][1]} if row else None
            return self._send(200, {"service": VERSION, "states": states, "latest": latest})
        if path.startswith("/builds/") and path[8:].isdigit():
            row = query(
                "SELECT id, pipeline, state, started FROM builds WHERE id = ?", (int(path[8:]),)
            )
            if not row:
                return self._send(404, {"error": "no such build"})
            keys = ("id", "pipeline", "state", "started")
            return self._send(200, dict(zip(keys, row[0])))
        return self._send(404, {"error": "no such route"})

    def log_message(self, fmt, *args):
        sys.stderr.write("statusd: " + (fmt % args) + "\n")


if __name__ == "__main__":
    print(f"statusd: listening on {BIND}:{PORT}, database {DB}", file=sys.stderr, flush=True)
    ThreadingHTTPServer((BIND, PORT), Handler).serve_forever()
