"""Which files of a repository are the tests, and the files a grading runs on.

A grading never trusts the submission's tests or test configuration (DESIGN.md, "Reset the
tests before grading"): every test file, ``conftest.py`` and pytest configuration file is the
task version's, or absent when the task has none, and the hidden test files are added.

``setup.cfg`` and ``pyproject.toml`` hold more than pytest's configuration (metadata, other
tools' settings, a fix's own edits). They count as test paths, so the task version's copy
travels in :attr:`RepositoryTests.test_files`, but the submission's own file stays in the
graded workspace: pytest never reads it, because the grading hands pytest the task version's
configuration explicitly (``-c``, :func:`pytest_config`), whichever file held it. Every other
configuration file pytest could discover (``pytest.ini``, ``.pytest.ini``, ``pytest.toml``,
``.pytest.toml``, ``tox.ini``) is restored or removed wholesale.
"""

from __future__ import annotations

import configparser
import fnmatch
import tomllib
from collections.abc import Mapping

TEST_DIRECTORIES = ("tests", "test")
TEST_NAMES = ("test_*.py", "*_test.py", "conftest.py")
# Configuration files with no job but pytest's (restored or removed wholesale).
PYTEST_ONLY_CONFIG = ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini")
MIXED_CONFIG = ("pyproject.toml", "setup.cfg")  # pytest's section and other things
# Files a Python process loads by itself from a directory on its path: never the submission's.
STARTUP_FILES = ("sitecustomize.py", "usercustomize.py", "*.pth")
# Where the grading writes the task version's pytest configuration (its suffix is the
# original's: pytest reads a ``-c`` file's section by suffix).
GRADING_CONFIG = ".crucible-pytest"


def is_test_path(path: str) -> bool:
    """Whether ``path`` (workspace-relative, ``/``-separated) is a test file or test
    configuration that a grading takes from the task version: ``test_*.py``, ``*_test.py``,
    ``conftest.py`` anywhere, anything under a ``tests/`` or ``test/`` directory, pytest's
    configuration files at any depth (``pytest.ini``, ``.pytest.ini``, ``pytest.toml``,
    ``.pytest.toml``, ``tox.ini``, ``pyproject.toml``, ``setup.cfg``), and the interpreter's
    startup files (``sitecustomize.py``, ``usercustomize.py``, ``*.pth``).
    """
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRECTORIES for part in parts[:-1]):
        return True
    patterns = (*TEST_NAMES, *PYTEST_ONLY_CONFIG, *MIXED_CONFIG, *STARTUP_FILES)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def grading_files(
    files: Mapping[str, bytes],
    test_files: Mapping[str, bytes],
    hidden_files: Mapping[str, bytes],
) -> dict[str, bytes]:
    """The workspace a grading runs on: ``files`` (the submission's final files) with every
    test path (:func:`is_test_path`) the task version's or removed, ``pyproject.toml`` and
    ``setup.cfg`` kept as the submission left them (see the module), nothing of a ``.git``
    directory, and ``hidden_files`` added on top.

    Returns:
        ``{path: content}``, sorted by path.
    """
    final: dict[str, bytes] = {}
    for path, content in files.items():
        if ".git" in path.split("/"):
            continue
        name = path.rsplit("/", 1)[-1]
        if is_test_path(path) and not (name in MIXED_CONFIG and "/" not in path):
            continue
        final[path] = bytes(content)
    for path, content in test_files.items():
        if path.rsplit("/", 1)[-1] in MIXED_CONFIG and "/" not in path and path in final:
            continue  # the submission's own; pytest reads the task's copy (pytest_config)
        final[path] = bytes(content)
    for path, content in hidden_files.items():
        final[path] = bytes(content)
    return dict(sorted(final.items()))


def pytest_config(test_files: Mapping[str, bytes]) -> tuple[str, bytes]:
    """The task version's pytest configuration, as the grading hands it to pytest (``-c``):
    the first root-level file pytest itself would choose (``pytest.toml``, ``.pytest.toml``,
    ``pytest.ini``, ``.pytest.ini``, then ``pyproject.toml``, ``tox.ini`` and ``setup.cfg``
    when they have a pytest section), copied under the name ``.crucible-pytest`` plus its
    suffix; an empty ``[pytest]`` file when the task has none.

    Returns:
        ``(path, content)`` to write at the workspace's root.
    """
    for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):
        if name in test_files:
            content = test_files[name]
            if name.endswith(".ini") and not _ini_has(content, "pytest"):
                break  # a pytest.ini without a [pytest] section: an empty configuration
            return _copy_name(name), content
    else:
        for name, has_section in (
            ("pyproject.toml", _toml_has_pytest),
            ("tox.ini", lambda c: _ini_has(c, "pytest")),
            ("setup.cfg", lambda c: _ini_has(c, "tool:pytest")),
        ):
            if name in test_files and has_section(test_files[name]):
                return _copy_name(name), test_files[name]
    return GRADING_CONFIG + ".ini", b"[pytest]\n"


def _copy_name(name: str) -> str:
    return GRADING_CONFIG + "." + name.rsplit(".", 1)[-1]


def _ini_has(content: bytes, section: str) -> bool:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(content.decode("utf-8", "replace"))
    except configparser.Error:
        return False
    return parser.has_section(section)


def _toml_has_pytest(content: bytes) -> bool:
    try:
        document = tomllib.loads(content.decode("utf-8", "replace"))
    except tomllib.TOMLDecodeError:
        return False
    tool = document.get("tool", {})
    return isinstance(tool, dict) and isinstance(tool.get("pytest"), dict)
