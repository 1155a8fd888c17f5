"""HTTP in the web workers goes through Django's sync handler (a2wsgi, console/asgi.py): under
granian, as `up` and the pods run it, a request's body reaches Django (granian's ``receive`` is
not a coroutine, which a2wsgi's body reader needs) and GETs and POSTs are answered as Django
answers them, never with a 500."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from console.management.stack import web_server_argv
from tests.ports import free_port, wait_answering

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def answer(request) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_granian_hands_request_bodies_to_django():
    port = free_port()
    argv = web_server_argv("127.0.0.1", port, workers=1)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(proc, f"{base}/livez")
        # a form POST with a CSRF cookie but without the token: Django reads the body for it,
        # then refuses (403), where an unreadable body was a 500
        form = urllib.request.Request(
            f"{base}/accounts/login/",
            data=b"username=nobody&password=wrong" + b"&pad=" + b"x" * 70_000,
            # a CSRF cookie, so that Django goes on to read the form's token from the body
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": "csrftoken=" + "c" * 32,
            },
            method="POST",
        )
        status, body = answer(form)
        assert status == 403 and b"security token is missing" in body, (status, body[:300])
        assert answer(f"{base}/livez")[0] == 200
    finally:
        proc.terminate()
        output = proc.communicate(timeout=20)[0].decode(errors="replace")
    assert "Traceback" not in output, output[-3000:]
