"""Source distributions for generated repository tasks: pinned by exact version, read in memory
with no path leaving the archive, no link followed and sizes capped; licence and layout read."""

import pytest

from tasks_library.generators import sdists
from tasks_library.generators.sdists import SdistError, fetch, parse_pin, read_project, unpack
from tests.tasks_library.repo_bugs_helpers import CALC, PKG_INFO, TESTS, sdist


def test_a_pin_is_one_exact_version():
    assert parse_pin("More_Itertools==10.5.0") == ("more-itertools", "10.5.0")
    for bad in ("inflection", "inflection>=0.5", "inflection[x]==0.5.1", "inflection==0.*"):
        with pytest.raises(SdistError) as caught:
            parse_pin(bad)
        assert caught.value.field == "package"
        assert repr(bad) in str(caught.value)


def test_a_project_is_read_with_its_licence_layout_and_tests(tmp_path):
    archive = sdist(
        tmp_path / "calc-1.0.tar.gz",
        {
            "PKG-INFO": PKG_INFO,
            "LICENSE": b"MIT licence text",
            "src/calc/__init__.py": CALC,
            "src/calc.egg-info/SOURCES.txt": b"x",
            "tests/test_calc.py": TESTS,
            "docs/conf.py": b"project = 'calc'\n",
            "setup.py": b"",
        },
        top="calc-1.0",
    )
    project = read_project(archive)
    assert (project.name, project.version, project.licence) == ("calc", "1.0", "MIT")
    assert project.licence_files == ("LICENSE",)
    assert project.pythonpath == "src"
    assert project.test_files == ("tests/test_calc.py",)
    assert project.source_files == ("src/calc/__init__.py",)
    assert "src/calc.egg-info/SOURCES.txt" not in project.files  # build output left out
    assert project.files["src/calc/__init__.py"] == CALC


def test_the_licence_comes_from_the_expression_then_the_field_then_the_classifier(tmp_path):
    cases = {
        b"License-Expression: Apache-2.0\nLicense: ignored\n": "Apache-2.0",
        b"License: BSD\n": "BSD",
        b"License: UNKNOWN\nClassifier: License :: OSI Approved :: MIT License\n": "MIT",
        b"Classifier: License :: OSI Approved :: BSD License\n": "BSD License",
        b"": "",
    }
    for headers, expected in cases.items():
        files = {"PKG-INFO": b"Metadata-Version: 2.1\nName: calc\n" + headers}
        assert sdists.licence_of(files)[0] == expected


@pytest.mark.parametrize("name", ["../evil.py", "/etc/passwd", "calc-1.0/../../evil.py"])
def test_a_member_outside_the_archive_is_refused(tmp_path, name):
    archive = sdist(tmp_path / "calc-1.0.tar.gz", {"calc-1.0/PKG-INFO": PKG_INFO, name: b"x"})
    with pytest.raises(SdistError, match="leaves the archive"):
        unpack(archive)


def test_links_are_never_followed_or_kept(tmp_path):
    archive = sdist(
        tmp_path / "calc-1.0.tar.gz",
        {"PKG-INFO": PKG_INFO, "calc.py": CALC},
        links={"secrets.txt": "/etc/shadow", "up": "../../.."},
        top="calc-1.0",
    )
    files, notes = unpack(archive)
    assert set(files) == {"PKG-INFO", "calc.py"}
    assert len(notes) == 2 and all("not a regular file" in note for note in notes)


def test_sizes_and_counts_are_capped(tmp_path, monkeypatch):
    big = sdist(tmp_path / "big-1.0.tar.gz", {"a.py": b"x" * 2048}, top="big-1.0")
    monkeypatch.setattr(sdists, "MAX_FILE_BYTES", 1024)
    with pytest.raises(SdistError, match="over the 1024 byte limit"):
        unpack(big)
    monkeypatch.setattr(sdists, "MAX_FILE_BYTES", 4096)
    monkeypatch.setattr(sdists, "MAX_TOTAL_BYTES", 3000)
    two = sdist(tmp_path / "two-1.0.tar.gz", {"a.py": b"x" * 2048, "b.py": b"y" * 2048}, top="t")
    with pytest.raises(SdistError, match="more than 3000 bytes in all"):
        unpack(two)
    monkeypatch.setattr(sdists, "MAX_MEMBERS", 1)
    with pytest.raises(SdistError, match="more than 1 members"):
        unpack(two)


def test_members_under_two_top_directories_are_refused(tmp_path):
    archive = sdist(tmp_path / "calc-1.0.tar.gz", {"a/x.py": b"", "b/y.py": b""})
    with pytest.raises(SdistError, match="2 top directories"):
        unpack(archive)


def test_an_sdist_without_tests_is_refused_by_name(tmp_path):
    archive = sdist(
        tmp_path / "calc-1.0.tar.gz", {"PKG-INFO": PKG_INFO, "calc.py": CALC}, top="calc-1.0"
    )
    with pytest.raises(SdistError, match=r"calc==1.0: its sdist carries no test modules"):
        read_project(archive)


def test_a_cached_sdist_is_not_fetched_again(tmp_path):
    archive = sdist(tmp_path / "calc-1.0.tar.gz", {"PKG-INFO": PKG_INFO}, top="calc-1.0")
    # Found in the cache by its normalised name and version: pip is not run.
    assert fetch("calc==1.0", cache_dir=tmp_path) == archive
    assert fetch("Calc==1.0.0", cache_dir=tmp_path) == archive  # names and versions normalised
