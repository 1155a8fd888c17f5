"""Fetching an sdist for repo-bugs runs none of its code on the host: the file comes from the
package index's simple API, checked against the index's sha256, and is read in memory. The
sdist here has a setup.py and an in-tree build backend that would touch markers if run (pip
download, which the generator used before, prepares metadata by running them)."""

import pytest

from tasks_library.generators.sdists import SdistError, fetch, read_project
from tests.package_index import hostile_index, tar_gz


@pytest.fixture
def index(tmp_path, monkeypatch, settings):
    """A local index holding the hostile sdist ``evilcalc==1.0``; pip and the generator are both
    pointed at it."""
    with hostile_index(tmp_path, monkeypatch) as (url, markers):
        settings.PACKAGE_INDEX_URL = url
        yield url.removesuffix("/simple/"), markers, tmp_path / "index"


def test_the_sdist_is_fetched_and_read_and_nothing_of_it_runs(index, tmp_path):
    _url, markers, _root = index
    archive = fetch("evilcalc==1.0", cache_dir=tmp_path / "cache")
    assert not markers.exists(), sorted(p.name for p in markers.iterdir())
    project = read_project(archive)  # the honest path: the project reads as any other
    assert project.source_files == ("backend.py", "calc.py")
    assert project.test_files == ("tests/test_calc.py",)
    assert not markers.exists()


@pytest.mark.parametrize("accept_json", [True, False])
def test_pep_691_json_and_pep_503_html_pages_both_serve(index, tmp_path, accept_json):
    url, _markers, root = index
    if not accept_json:
        (root / "simple" / "evilcalc" / "index.json").unlink()
    archive = fetch("evilcalc==1.0", cache_dir=tmp_path / "cache", index=f"{url}/simple/")
    assert archive.name == "evilcalc-1.0.tar.gz"


def test_a_file_that_does_not_match_the_index_sha256_is_refused(index, tmp_path):
    url, markers, root = index
    tampered = root / "files" / "evilcalc-1.0.tar.gz"
    tar_gz(tampered, {"evilcalc-1.0/PKG-INFO": b"Name: evilcalc\n"})  # not what was hashed
    cache = tmp_path / "cache"
    with pytest.raises(SdistError, match="does not match the sha256 the index gives"):
        fetch("evilcalc==1.0", cache_dir=cache)
    assert not cache.exists() or not list(cache.iterdir())  # nothing partial is kept
    assert not markers.exists()


def test_an_unknown_project_or_version_is_named(index, tmp_path):
    with pytest.raises(SdistError, match="has no project 'nosuchproject'"):
        fetch("nosuchproject==1.0", cache_dir=tmp_path)
    with pytest.raises(SdistError, match="no source distribution of that name and version"):
        fetch("evilcalc==2.0", cache_dir=tmp_path)
