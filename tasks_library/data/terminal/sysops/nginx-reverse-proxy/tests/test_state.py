"""The gateway (nginx, from the final /app/gateway/nginx.conf) proxies /api/ to the unchanged
inventory API with the headers its contract requires."""

import hashlib
import json
from pathlib import Path

import pytest
from probe import cmdline_of, http, listener_exes, listener_pids, wait_port

GATEWAY, API = 8081, 9100
PRISTINE = Path("/tests/backend")
ITEMS = json.loads((PRISTINE / "items.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def up():
    assert wait_port(API, 10.0), "the inventory API is not listening on 9100"
    assert wait_port(GATEWAY, 10.0), "nothing listens on 127.0.0.1:8081 after nginx was started"


def test_backend_untouched():
    # the same files, byte for byte, and nothing added (a module beside the script would
    # shadow the standard library's when the API starts)
    live_dir = Path("/app/backend")
    live = sorted(p.relative_to(live_dir).as_posix() for p in live_dir.rglob("*"))
    assert live == sorted(p.name for p in PRISTINE.iterdir())
    for f in PRISTINE.iterdir():
        got = hashlib.sha256((live_dir / f.name).read_bytes()).hexdigest()
        assert got == hashlib.sha256(f.read_bytes()).hexdigest(), f.name


def test_listeners_are_the_real_services():
    assert listener_exes(GATEWAY) == {"/usr/sbin/nginx"}
    pids = listener_pids(API)
    assert len(pids) == 1
    assert "/app/backend/inventory_api.py" in cmdline_of(pids.pop())


def test_backend_still_guards_itself():
    status, _, body = http(API, "/items")
    assert status == 403


def test_healthz_from_nginx():
    status, headers, body = http(GATEWAY, "/healthz")
    assert status == 200
    assert body.strip() == b"gateway ok"
    assert headers.get("server", "").startswith("nginx")
    assert "x-inventory-backend" not in headers


def test_items_through_gateway():
    status, headers, body = http(GATEWAY, "/api/items")
    assert status == 200, body[:200]
    assert headers.get("server", "").startswith("nginx")
    assert headers.get("x-inventory-backend") == "inv-2.3"
    data = json.loads(body)
    assert data["items"] == ITEMS
    assert data["forwarded_for"] == "127.0.0.1"


@pytest.mark.parametrize("item", ITEMS[::3], ids=lambda i: i["sku"])
def test_item_by_sku(item):
    status, headers, body = http(GATEWAY, f"/api/items/{item['sku']}")
    assert status == 200
    assert json.loads(body)["item"] == item
    assert headers.get("x-inventory-backend") == "inv-2.3"


def test_unknown_sku_is_backend_404():
    status, headers, body = http(GATEWAY, "/api/items/SKU-0000")
    assert status == 404
    assert json.loads(body) == {"error": "no item SKU-0000"}


def test_api_health_prefix_stripped():
    status, _, body = http(GATEWAY, "/api/health")
    assert status == 200
    assert json.loads(body)["ok"] is True
