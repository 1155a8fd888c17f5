#!/usr/bin/env python3
"""heartbeat: the worker that the load balancer polls. Listens on 127.0.0.1:9300.

GET /        {"name": "heartbeat", "pid": ..., "served": ...}
GET /recycle answers, then exits with status 0 (the worker recycles itself this way after a
             batch; whoever supervises it must start it again)
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVED = 0


class Handler(BaseHTTPRequestHandler):
    server_version = "heartbeat/3.1"

    def _send(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        global SERVED
        SERVED += 1
        if self.path == "/recycle":
            self._send({"name": "heartbeat", "pid": os.getpid(), "recycling": True})
            threading.Timer(0.2, lambda: os._exit(0)).start()
            return
        self._send({"name": "heartbeat", "pid": os.getpid(), "served": SERVED})

    def log_message(self, fmt, *args):
        print("heartbeat: " + (fmt % args), flush=True)


if __name__ == "__main__":
    print(f"heartbeat: pid {os.getpid()} listening on 127.0.0.1:9300", flush=True)
    sys.stdout.flush()
    ThreadingHTTPServer(("127.0.0.1", 9300), Handler).serve_forever()
