"""The console's front-end build (frontend/build.mjs, core/frontend.py): the npm pin of
plotly.js equals the plotly wheel's copy (the fallback without Node serves the same plotly.js); a
build is current for exactly the inputs it was made from; a failed build leaves the last good one;
the static files served are the build, or the sources with the wheel's plotly.js and an import
map."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from core import frontend

NODE = shutil.which("node")


def test_npm_pin_is_the_plotly_wheels_plotly_js():
    pin = frontend.npm_pin()
    wheel_js = frontend.wheel_plotly_dir() / "plotly.min.js"
    assert frontend.plotly_js_version(wheel_js) == pin, (
        f"frontend/package.json pins plotly.js-dist-min {pin} but the plotly wheel bundles "
        f"{frontend.plotly_js_version(wheel_js)}: pin the wheel's version (npm install "
        "--save-exact plotly.js-dist-min@VERSION in frontend/) so that both ways of serving the "
        "console draw alike"
    )
    lock = json.loads((frontend.FRONTEND / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/plotly.js-dist-min"]["version"] == pin, (
        "package-lock.json is behind package.json"
    )
    installed = frontend.FRONTEND / "node_modules" / "plotly.js-dist-min" / "plotly.min.js"
    if installed.exists():  # after npm ci: the very same bytes
        assert installed.read_bytes() == wheel_js.read_bytes()


def test_pins_are_exact():
    package = json.loads((frontend.FRONTEND / "package.json").read_text())
    for name, spec in package["devDependencies"].items():
        assert spec[0].isdigit() and not any(c in spec for c in "^~<>=* x"), (
            f"{name} {spec!r} is not an exact pin"
        )


def test_plotly_js_version_refuses_a_file_without_banner(tmp_path):
    other = tmp_path / "other.js"
    other.write_text("console.log(1)\n")
    with pytest.raises(ValueError, match="no 'plotly.js vX.Y.Z' banner"):
        frontend.plotly_js_version(other)


@pytest.fixture
def scratch(tmp_path) -> Path:
    """A copy of frontend/ (sources, manifest, build script) sharing the checkout's node_modules."""
    if NODE is None:
        pytest.skip("node is not installed")
    assert frontend.ensure_build(), (
        "the checkout's front-end build failed (npm ci or npm run build)"
    )
    root = tmp_path / "frontend"
    shutil.copytree(frontend.FRONTEND / "console", root / "console")
    for name in (*frontend.BUILD_FILES, ".npmrc"):
        shutil.copy2(frontend.FRONTEND / name, root / name)
    (root / "node_modules").symlink_to(frontend.FRONTEND / "node_modules")
    return root


def build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, "build.mjs"], cwd=root, capture_output=True, text=True, timeout=120
    )


def test_build_is_current_for_its_inputs_only(scratch):
    assert frontend.build_outdated(scratch) == "frontend/dist has no build (no build-info.json)"
    done = build(scratch)
    assert done.returncode == 0, done.stderr
    assert frontend.build_outdated(scratch) is None
    info = frontend.build_info(scratch)
    assert info["plotly_js"] == frontend.npm_pin()
    dist = frontend.build_dir(scratch)
    chunk = (dist / info["plotly_chunk"]).read_text()
    assert "plotly.js" in chunk and len(chunk) > 1_000_000, (
        "plotly.js is bundled into the shared chunk"
    )
    live = (dist / "console" / "run_live.js").read_text()
    assert "plotly.js-dist-min" not in live and info["plotly_chunk"].split("/")[-1] in live, (
        "the page script imports the bundled chunk, not the npm name"
    )
    assert "console/run_live.js" in info["entries"] and (dist / "console" / "console.css").exists()

    pool = scratch / "console" / "pool.js"
    original = pool.read_bytes()
    pool.write_bytes(original + b"\n// edited\n")
    assert (
        frontend.build_outdated(scratch)
        == "frontend/dist is stale: console/pool.js changed since it was built"
    )
    pool.write_bytes(original)
    assert frontend.build_outdated(scratch) is None, "the same content again: current"
    (scratch / "console" / "shared").mkdir()
    (scratch / "console" / "shared" / "extra.js").write_text("export const x = 1;\n")
    assert "console/shared/extra.js" in frontend.build_outdated(scratch)
    (scratch / "console" / "shared" / "extra.js").unlink()
    (scratch / "console" / "review.css").unlink()
    assert "console/review.css" in frontend.build_outdated(scratch)


def test_a_failed_build_keeps_the_last_good_one(scratch):
    assert build(scratch).returncode == 0
    before = (frontend.build_dir(scratch) / "build-info.json").read_text()
    (scratch / "console" / "broken.js").write_text(
        "import Plotly from 'plotly.js-dist-min';\nPlotly.newPlot(\n"
    )
    done = build(scratch)
    assert done.returncode != 0 and "broken.js" in done.stderr
    assert (frontend.build_dir(scratch) / "build-info.json").read_text() == before
    assert not list(scratch.parent.glob("frontend/dist.partial-*")) and not list(
        scratch.glob("dist.partial-*")
    )


def test_ensure_build_says_why_it_serves_the_sources_without_npm(scratch, monkeypatch):
    monkeypatch.setenv(
        "PATH", "/nonexistent"
    )  # no npm on this PATH: what a machine without Node sees
    lines = []
    assert frontend.ensure_build(scratch, say=lines.append) is False
    assert len(lines) == 1 and lines[0].startswith("front-end build skipped (npm not found")
    assert f"plotly.js {frontend.npm_pin()} from the plotly wheel" in lines[0]
    assert not frontend.build_dir(scratch).exists()


def test_static_files_are_the_build_or_the_sources_and_never_node_modules(settings):
    settings.STATICFILES_DIRS = frontend.staticfiles_dirs(bundled=False)
    assert (
        Path(finders.find("console/run_live.js")) == frontend.FRONTEND / "console" / "run_live.js"
    )
    assert (
        Path(finders.find("plotly/plotly.min.js")) == frontend.wheel_plotly_dir() / "plotly.min.js"
    )
    assert Path(finders.find("fallback/plotly.js")) == frontend.FRONTEND / "fallback" / "plotly.js"
    assert finders.find("node_modules/plotly.js-dist-min/plotly.min.js") is None
    assert finders.find("package.json") is None

    settings.STATICFILES_DIRS = frontend.staticfiles_dirs(bundled=True)
    found = finders.find("console/run_live.js")
    assert found is None or Path(found) == frontend.build_dir() / "console" / "run_live.js"
    assert finders.find("plotly/plotly.min.js") is None, "bundled: the wheel's copy is not served"
    assert finders.find("node_modules/plotly.js-dist-min/plotly.min.js") is None


@pytest.mark.django_db
def test_pages_carry_the_import_map_only_unbundled(settings):
    settings.FRONTEND_BUNDLED = False
    response = Client().get("/sandboxes/")
    html = response.content.decode()
    # The import map is an inline script: it carries the nonce of the page's policy.
    nonce = re.search(r'<script type="importmap" nonce="([^"]+)">', html).group(1)
    assert f"'nonce-{nonce}'" in response["Content-Security-Policy"]
    assert (
        f'<script type="importmap" nonce="{nonce}">{{"imports": {{"plotly.js-dist-min": '
        '"/static/fallback/plotly.js"}}</script>'
    ) in html
    assert html.index('type="importmap"') < html.index('type="module"'), (
        "an import map must precede the modules"
    )
    settings.FRONTEND_BUNDLED = True
    html = Client().get("/sandboxes/").content.decode()
    assert (
        "importmap" not in html and '<script type="module" src="/static/console/pool.js">' in html
    )


def test_hashed_chunks_are_cached_forever_and_page_scripts_for_a_minute(settings):
    if NODE is None:
        pytest.skip("node is not installed")
    assert frontend.ensure_build()
    settings.STATICFILES_DIRS = frontend.staticfiles_dirs(bundled=True)
    chunk = Client().get(f"/static/{frontend.build_info()['plotly_chunk']}")
    assert chunk.status_code == 200 and "immutable" in chunk["Cache-Control"], chunk[
        "Cache-Control"
    ]
    entry = Client().get("/static/console/run_live.js")
    assert entry.status_code == 200 and "immutable" not in entry["Cache-Control"], entry[
        "Cache-Control"
    ]
    assert entry["Content-Type"].startswith("text/javascript")
