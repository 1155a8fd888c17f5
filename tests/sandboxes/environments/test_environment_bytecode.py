"""A packages layer carries its bytecode: sandboxes never write ``.pyc`` files (the
store is read-only there), so without them every grading recompiled every module it imported.

Built twice, in two stores, the layer holds a checked-hash pyc (PEP 552) for each module, byte for
byte the same in both builds, its code naming the source where a sandbox sees it; in a sandbox,
the import machinery takes the module's code from that pyc, never from compiling its source."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from sandboxes.environments.build import materialise
from sandboxes.environments.mount import SITE_PACKAGES
from sandboxes.environments.packages import bytecode_interpreter, compile_bytecode
from sandboxes.environments.spec import parse
from sandboxes.environments.store import EnvironmentStore
from tests.environments import PYTEST_PACKAGES, built, grader

CHECKED_HASH = 0b11  # PEP 552 flags: hash-based, check the source


def pycs(site) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*.pyc"))}


def test_two_builds_write_the_same_checked_hash_pycs_for_every_module(tmp_path):
    spec = parse("python3.11", PYTEST_PACKAGES)
    sites = [
        materialise(spec, environment_store=EnvironmentStore(tmp_path / name)).packages.tree
        / SITE_PACKAGES
        for name in ("first", "second")
    ]
    first, second = (pycs(site) for site in sites)
    assert first == second
    modules = sorted(sites[0].rglob("*.py"))
    cached = {importlib.util.cache_from_source(str(m)) for m in modules}
    assert len(modules) > 50 and {str(sites[0] / name) for name in first} == cached
    for name, data in first.items():
        assert data[:4] == importlib.util.MAGIC_NUMBER, name
        assert int.from_bytes(data[4:8], "little") == CHECKED_HASH, name
    # the code names its source as a sandbox sees it (/env/site-packages), not the build's path
    assert (
        b"/env/site-packages/_pytest/python.py"
        in first["_pytest/__pycache__/python.cpython-311.pyc"]
    )
    assert str(tmp_path).encode() not in b"".join(first.values())


PROGRAM = """
import importlib.util


def refuse(*args, **kwargs):
    raise AssertionError("compiled from source")


def probe(module):
    spec = importlib.util.find_spec(module)
    spec.loader.source_to_code = refuse  # get_code falls back to it when the pyc is not used
    return spec.loader.get_code(spec.name).co_filename
"""
TESTS = """
def check(candidate):
    assert candidate("{module}") == "/env/site-packages/{source}", candidate("{module}")
"""


@pytest.mark.parametrize(
    ("environment", "module", "source"),
    [
        ("python3.11-pytest", "_pytest.python", "_pytest/python.py"),
        ("python3.13-numpy-pandas", "pandas.core.frame", "pandas/core/frame.py"),
    ],
)
def test_a_sandbox_imports_the_layers_modules_from_their_bytecode(environment, module, source):
    tests = TESTS.format(module=module, source=source)
    result = grader(environment).grade(PROGRAM, tests, "probe")
    assert result.status == "ok" and result.tests_passed == 1, (result.detail, result.stderr)


def test_a_debian_root_runtimes_layer_is_compiled_by_its_own_interpreter(tmp_path):
    """python3.13's layer (the Debian root's interpreter, not the host's 3.11) carries pycs with
    3.13's magic number, and compiling the same files again writes the same bytes."""
    environment = built("python3.13-numpy-pandas")
    site = environment.packages.tree / SITE_PACKAGES
    compiled = pycs(site)
    assert len(compiled) > 500 and all(".cpython-313." in name for name in compiled)
    magics = {data[:4] for data in compiled.values()}
    assert len(magics) == 1 and magics != {importlib.util.MAGIC_NUMBER}  # not the host's 3.11
    assert {int.from_bytes(d[4:8], "little") for d in compiled.values()} == {CHECKED_HASH}
    frame = compiled["pandas/core/__pycache__/frame.cpython-313.pyc"]
    assert b"/env/site-packages/pandas/core/frame.py" in frame

    part = "pandas/io/formats"  # a few dozen modules, at the same path below the target
    shutil.copytree(site / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    interpreter = bytecode_interpreter("python3.13", environment.root.tree)
    compile_bytecode(tmp_path, interpreter=interpreter)
    again = pycs(tmp_path)
    assert len(again) > 10 and again == {k: v for k, v in compiled.items() if k.startswith(part)}
