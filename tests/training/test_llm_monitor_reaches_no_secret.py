"""An operator's run configuration cannot make the LLM monitor send a worker's secrets anywhere:
the key is one the deployment named for monitors (not any environment variable), and the URL may
not reach loopback, link-local or cloud-metadata addresses (every address the host resolves to
is checked, at configuration and at each connection) unless a setting allows that network;
redirects are not followed, so the key goes to the checked endpoint only."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from core.outbound import guarded_session
from tests.training.test_llm_monitor import GOOD, VIEW, ChatServer
from training.config import ConfigError, RunConfig
from training.monitors import LlmMonitor, LlmMonitorConfig


@pytest.fixture
def server():
    chat = ChatServer()
    yield chat
    chat.close()


def refused(llm: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict({"llm_monitor": {"model": "m", **llm}})
    return str(caught.value)


@pytest.mark.parametrize("variable", ["HOME", "DATABASE_URL", "CRUCIBLE_LLM_MONITOR_KEY_JUDGE"])
def test_a_configuration_cannot_name_an_environment_variable(variable, settings, server):
    settings.LLM_MONITOR_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    message = refused({"url": server.url, "api_key_env": variable})
    assert "unknown key(s) api_key_env" in message
    message = refused({"url": server.url, "api_key": variable})
    assert "must name a key configured for monitors" in message
    assert not server.requests


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000/v1", "loopback"),
        ("http://localhost:8000", "loopback"),  # a name: resolved, then checked
        ("http://[::1]:8000", "loopback"),
        ("http://[::ffff:127.0.0.1]:8000", "loopback"),
        ("http://0.0.0.0:8000", "unspecified"),
        ("http://169.254.169.254/latest/meta-data", "a cloud metadata service"),
        ("http://[fd00:ec2::254]/", "a cloud metadata service"),
        ("http://169.254.1.1/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
    ],
)
def test_local_and_metadata_addresses_are_refused(url, why, settings):
    settings.LLM_MONITOR_ALLOWED_NETWORKS = []
    assert f", {why}: refused" in refused({"url": url})


def test_an_allowed_network_and_a_private_one_pass(settings, server):
    settings.LLM_MONITOR_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    RunConfig.from_dict({"llm_monitor": {"url": server.url, "model": "m"}})
    settings.LLM_MONITOR_ALLOWED_NETWORKS = []
    RunConfig.from_dict({"llm_monitor": {"url": "http://10.0.0.7:8000/v1", "model": "m"}})


def test_each_connection_is_checked_again(settings, server):
    settings.LLM_MONITOR_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    config = LlmMonitorConfig.from_config({"url": server.url, "model": "m", "max_retries": 0})
    settings.LLM_MONITOR_ALLOWED_NETWORKS = []  # the name now leads somewhere it may not go
    verdict = LlmMonitor(config, backoff_s=0.01).score(VIEW)
    assert verdict.failed and "endpoint refused" in verdict.reason and "loopback" in verdict.reason
    with pytest.raises(requests.ConnectionError, match="loopback: refused"):
        guarded_session([]).post(server.url + "/v1/chat/completions", json={})
    assert not server.requests  # nothing reached the server, key or no key


def test_a_redirect_is_not_followed_with_the_key(settings, server, monkeypatch):
    settings.LLM_MONITOR_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.LLM_MONITOR_KEYS = ["judge"]
    monkeypatch.setenv("CRUCIBLE_LLM_MONITOR_KEY_JUDGE", "secret-123")
    hits = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_POST(self):  # the http.server API
            hits.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere) as other:
        threading.Thread(target=other.serve_forever, daemon=True).start()
        target = f"http://127.0.0.1:{other.server_address[1]}/steal"
        server.script = [(307, GOOD, 0.0)]
        original = server.httpd.RequestHandlerClass.send_header

        def with_location(handler, key, value):
            original(handler, key, value)
            if key == "Content-Type":
                original(handler, "Location", target)

        monkeypatch.setattr(server.httpd.RequestHandlerClass, "send_header", with_location)
        config = LlmMonitorConfig.from_config(
            {"url": server.url, "model": "m", "api_key": "judge", "max_retries": 0}
        )
        verdict = LlmMonitor(config, backoff_s=0.01).score(VIEW)
        other.shutdown()
    assert verdict.failed and "redirects are not followed" in verdict.reason
    assert hits == []
