"""The console has an icon: every page links it and ``/favicon.ico`` answers one (no 404 in the
log of every first visit)."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_every_page_links_an_icon_that_is_served():
    client = Client()
    page = client.get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/favicon.svg" type="image/svg+xml">' in page
    for path in ("/favicon.ico", "/favicon.svg"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"] == "image/svg+xml" and b"<svg" in response.content
        assert "max-age" in response.get("Cache-Control", "")
