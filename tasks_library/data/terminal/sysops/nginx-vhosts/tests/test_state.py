"""nginx, started from the final /app/nginx/nginx.conf, serves each host name as SITES.md says."""

import hashlib
import json
from pathlib import Path

import pytest
from probe import http, listener_exes, wait_port

PORT = 8088
PRISTINE = Path("/tests/pristine/www")
LIVE = Path("/srv/www/shop")
INDEX = (PRISTINE / "index.html").read_bytes()


def get(host, path):
    return http(PORT, path, headers={"Host": host})


@pytest.fixture(scope="module", autouse=True)
def up():
    assert wait_port(PORT, 10.0), "nothing listens on 127.0.0.1:8088 after nginx was started"


def test_listener_is_nginx():
    assert listener_exes(PORT) == {"/usr/sbin/nginx"}


def test_site_untouched():
    live = sorted(p.relative_to(LIVE).as_posix() for p in LIVE.rglob("*") if p.is_file())
    want = sorted(p.relative_to(PRISTINE).as_posix() for p in PRISTINE.rglob("*") if p.is_file())
    assert live == want
    for rel in want:
        assert (
            hashlib.sha256((LIVE / rel).read_bytes()).digest()
            == hashlib.sha256((PRISTINE / rel).read_bytes()).digest()
        ), rel


@pytest.mark.parametrize("rel", ["index.html", "robots.txt", "static/app.js", "static/app.css"])
def test_shop_files(rel):
    status, headers, body = get("shop.internal", "/" + rel)
    assert status == 200 and body == (PRISTINE / rel).read_bytes()
    assert headers.get("server", "").startswith("nginx")
    assert headers.get("etag", "").endswith(f'-{len(body):x}"')


def test_shop_root_and_routes():
    for path in ("/", "/orders/123", "/account/settings?tab=2"):
        status, headers, body = get("shop.internal", path)
        assert status == 200 and body == INDEX, path
        assert headers.get("content-type", "").startswith("text/html"), path


def test_shop_static_cache_and_404():
    status, headers, _ = get("shop.internal", "/static/app.js")
    assert "max-age=604800" in headers.get("cache-control", "")
    status, _, body = get("shop.internal", "/static/missing.js")
    assert status == 404 and body != INDEX


@pytest.mark.parametrize("host", ["legacy.internal", "www.legacy.internal"])
def test_legacy_redirect(host):
    status, headers, _ = get(host, "/orders/77?ref=mail&x=1")
    assert status == 301
    assert headers.get("location") == "http://shop.internal:8088/orders/77?ref=mail&x=1"


def test_status_health():
    status, headers, body = get("status.internal", "/health")
    assert status == 200
    assert headers.get("content-type", "").startswith("application/json")
    assert json.loads(body) == {"status": "ok", "service": "shop-front"}


@pytest.mark.parametrize("host", ["unknown.internal", "127.0.0.1", "shop.internal.evil"])
def test_other_hosts_421(host):
    status, _, body = get(host, "/")
    assert status == 421 and body != INDEX
