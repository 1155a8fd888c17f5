#!/usr/bin/env python3
"""Inventory API (internal). Listens on 127.0.0.1:9100; only the gateway may call it.

Contract with the gateway (see README.md):
  * every request must carry ``X-Request-Source: gateway``, else 403;
  * the gateway forwards the client's address in ``X-Forwarded-For``;
  * paths are the API's own: /health, /items, /items/<sku>.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST, PORT = "127.0.0.1", 9100
ITEMS = json.loads((Path(__file__).parent / "items.json").read_text())
BY_SKU = {item["sku"]: item for item in ITEMS}


class Handler(BaseHTTPRequestHandler):
    server_version = "inventory-api/2.3"

    def _send(self, status, payload):
        body = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Inventory-Backend", "inv-2.3")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.headers.get("X-Request-Source") != "gateway":
            return self._send(403, {"error": "requests must come through the gateway"})
        client = self.headers.get("X-Forwarded-For")
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self._send(200, {"ok": True, "forwarded_for": client})
        if path == "/items":
            return self._send(200, {"items": ITEMS, "forwarded_for": client})
        if path.startswith("/items/"):
            sku = path[len("/items/") :]
            if sku in BY_SKU:
                return self._send(200, {"item": BY_SKU[sku], "forwarded_for": client})
            return self._send(404, {"error": f"no item {sku}"})
        return self._send(404, {"error": f"no route {path}"})

    def log_message(self, fmt, *args):
        sys.stderr.write("inventory-api: " + (fmt % args) + "\n")


if __name__ == "__main__":
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
