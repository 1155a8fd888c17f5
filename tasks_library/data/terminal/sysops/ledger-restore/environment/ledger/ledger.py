#!/usr/bin/env python3
"""ledger: account balances API over /srv/ledger/ledger.db. Listens on 127.0.0.1:8095.

Refuses to start on a database that fails SQLite's integrity check or has the wrong schema
version (PRAGMA user_version must be 7).

GET /stats                {"transactions": N, "last_id": M}
GET /balance/<account>    {"account": ..., "balance_cents": ...}
GET /tx/<id>              one transaction
"""

import json
import sqlite3
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DB = "/srv/ledger/ledger.db"
SCHEMA_VERSION = 7


def connect():
    return sqlite3.connect(f"file:{DB}?mode=ro", uri=True)


def preflight():
    try:
        con = connect()
        check = [row[0] for row in con.execute("PRAGMA integrity_check")]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        con.execute("SELECT id, ts, src, dst, amount_cents, memo FROM transactions LIMIT 1")
    except sqlite3.Error as exc:
        raise SystemExit(f"ledger: cannot use {DB}: {exc}") from None
    if check != ["ok"]:
        raise SystemExit(f"ledger: {DB} is corrupt: {check[:3]}")
    if version != SCHEMA_VERSION:
        raise SystemExit(f"ledger: {DB} has schema version {version}, expected {SCHEMA_VERSION}")


class Handler(BaseHTTPRequestHandler):
    server_version = "ledger/7.2"

    def _send(self, status, payload):
        body = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        con = connect()
        try:
            if self.path == "/stats":
                n, last = con.execute("SELECT COUNT(*), MAX(id) FROM transactions").fetchone()
                return self._send(200, {"transactions": n, "last_id": last})
            if self.path.startswith("/balance/"):
                acct = self.path[len("/balance/") :]
                total = "SELECT COALESCE(SUM(amount_cents), 0) FROM transactions WHERE {} = ?"
                got = con.execute(total.format("dst"), (acct,)).fetchone()[0]
                sent = con.execute(total.format("src"), (acct,)).fetchone()[0]
                return self._send(200, {"account": acct, "balance_cents": got - sent})
            if self.path.startswith("/tx/") and self.path[4:].isdigit():
                row = con.execute(
                    "SELECT id, ts, src, dst, amount_cents, memo FROM transactions WHERE id = ?",
                    (int(self.path[4:]),),
                ).fetchone()
                if row is None:
                    return self._send(404, {"error": "no such transaction"})
                keys = ("id", "ts", "from", "to", "amount_cents", "memo")
                return self._send(200, dict(zip(keys, row)))
            return self._send(404, {"error": "no such route"})
        finally:
            con.close()

    def log_message(self, fmt, *args):
        sys.stderr.write("ledger: " + (fmt % args) + "\n")


if __name__ == "__main__":
    preflight()
    ThreadingHTTPServer(("127.0.0.1", 8095), Handler).serve_forever()
