"""docs.internal: nginx, started from the final /etc/nginx/nginx.conf, serves the site."""

import hashlib
from pathlib import Path

import pytest
from probe import http, listener_exes, wait_port

PORT = 8080
PRISTINE = Path("/tests/site")
LIVE = Path("/srv/docs/public")
PAGES = sorted(p.relative_to(PRISTINE).as_posix() for p in PRISTINE.rglob("*") if p.is_file())


@pytest.fixture(scope="module", autouse=True)
def up():
    assert wait_port(PORT, 10.0), "nothing listens on 127.0.0.1:8080 after nginx was started"


def test_listener_is_nginx():
    assert listener_exes(PORT) == {"/usr/sbin/nginx"}


def test_site_files_untouched():
    live = sorted(p.relative_to(LIVE).as_posix() for p in LIVE.rglob("*") if p.is_file())
    assert live == PAGES
    for rel in PAGES:
        a = hashlib.sha256((PRISTINE / rel).read_bytes()).hexdigest()
        b = hashlib.sha256((LIVE / rel).read_bytes()).hexdigest()
        assert a == b, f"{rel} was changed"


def test_index():
    status, headers, body = http(PORT, "/")
    assert status == 200
    assert body == (PRISTINE / "index.html").read_bytes()
    assert headers.get("server", "").startswith("nginx")
    assert headers.get("content-type", "").startswith("text/html")


@pytest.mark.parametrize("rel", [p for p in PAGES if p != "404.html"])
def test_every_file_served(rel):
    status, headers, body = http(PORT, "/" + rel)
    assert status == 200, rel
    assert body == (PRISTINE / rel).read_bytes()
    # nginx's own ETag: "<mtime hex>-<size hex>"
    assert headers.get("etag", "").endswith(f'-{len(body):x}"')


def test_missing_page_is_404_with_site_page():
    status, headers, body = http(PORT, "/guide/no-such-page.html")
    assert status == 404
    assert body == (PRISTINE / "404.html").read_bytes()


def test_assets_cached_one_day():
    for rel in ("assets/site.css", "assets/logo.svg"):
        status, headers, body = http(PORT, "/" + rel)
        assert status == 200
        assert "max-age=86400" in headers.get("cache-control", ""), rel
        assert "expires" in headers
    status, headers, _ = http(PORT, "/assets/site.css")
    assert headers.get("content-type", "").startswith("text/css")


def test_pages_not_cached_as_assets():
    _, headers, _ = http(PORT, "/guide/oncall.html")
    assert "max-age=86400" not in headers.get("cache-control", "")


def test_range_request():
    status, headers, body = http(PORT, "/index.html", headers={"Range": "bytes=0-14"})
    assert status == 206
    assert body == (PRISTINE / "index.html").read_bytes()[:15]
