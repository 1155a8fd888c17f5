# ruff: noqa: E501 - a small project and its tests written as byte strings, one source line a line
"""Honest test suites that look like tampering to a careless first line: test modules that bind
wrappers of builtins (toolz's ``sorted = curry(sorted)``), doctests (which set ``builtins._``),
``mock.ANY`` inside expected values, ``monkeypatch`` of builtins and of the project, a snippet compiled under its test's own name
(boltons' traceback tests), unittest
comparisons of the project's own value objects, warnings from threads, logging, a project plugin
loaded by the task's ``pytest_plugins``, fixtures from the project's own helper module. The reference fix must
resolve, the unfixed project must not, with no flag either way."""

from __future__ import annotations

import pytest

from sandboxes.repository import RepositoryTests, grade_repository, is_test_path
from tests.environments import built

pytestmark = pytest.mark.slow

SHAPES = (
    b'"""Shapes.\n\n>>> area(Rect(2, 3))\n6\n"""\n\nimport functools\nimport logging\n\n'
    b"log = logging.getLogger(__name__)\n\n\n"
    b"class Rect:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n\n"
    b"    def __eq__(self, other):\n        if not isinstance(other, Rect):\n"
    b"            return NotImplemented\n        return (self.w, self.h) == (other.w, other.h)\n\n"
    b"    __hash__ = None\n\n    def __repr__(self):\n        return f'Rect({self.w}, {self.h})'\n\n\n"
    b"def area(rect):\n    log.debug('area of %r', rect)\n    return rect.w * rect.h\n\n\n"
    b"def scale(rect, k):\n    return Rect(rect.w * k, rect.h)  # the bug: h is not scaled\n\n\n"
    b"def curry(f):\n    @functools.wraps(f)\n    def curried(*args, **kwargs):\n"
    b"        return f(*args, **kwargs)\n\n    return curried\n"
)
FIXED = SHAPES.replace(
    b"Rect(rect.w * k, rect.h)  # the bug: h is not scaled", b"Rect(rect.w * k, rect.h * k)"
)
FILES = {
    "shapes/__init__.py": SHAPES,
    "shapes/testing.py": (
        b"import pytest\n\nfrom shapes import Rect\n\n\n@pytest.fixture\ndef unit():\n"
        b"    return Rect(1, 1)\n\n\ndef pytest_configure(config):\n"
        b"    config.addinivalue_line('markers', 'shapes: tests of shapes')\n"
    ),
    "tests/__init__.py": b"",
    "tests/test_shapes.py": (
        b"import builtins\nimport threading\nimport unittest\nimport warnings\n"
        b"from unittest import mock\n\nimport pytest\n\nfrom shapes import Rect, area, curry, scale\n"
        b"from shapes.testing import unit  # noqa: F401\n\n"
        b"sorted = curry(sorted)\nfilter = curry(filter)\nEXPECTED = {'shape': mock.ANY, 'area': 6}\n\n\n"
        b"@pytest.mark.shapes\ndef test_area(unit):\n    assert area(unit) == 1\n"
        b"    assert {'shape': Rect(2, 3), 'area': area(Rect(2, 3))} == EXPECTED\n"
        b"    assert sorted([3, 1]) == [1, 3] and list(filter(None, [0, 1])) == [1]\n\n\n"
        b"def test_scale():\n    assert scale(Rect(2, 3), 2) == Rect(4, 6)\n\n\n"
        b"def test_open_patched(monkeypatch):\n    monkeypatch.setattr(builtins, 'open', None)\n"
        b"    monkeypatch.setattr('shapes.area', lambda rect: 0)\n    import shapes\n"
        b"    assert shapes.area(Rect(1, 1)) == 0\n\n\n"
        b"def test_warning_in_a_thread():\n    def work():\n        warnings.warn('in a thread')\n"
        b"    with warnings.catch_warnings(record=True):\n        worker = threading.Thread(target=work)\n"
        b"        worker.start()\n        worker.join()\n\n\n"
        b"def test_snippet_compiled_under_its_own_name():\n    scope = {}\n"
        b"    exec(compile('x = 1', __file__, 'exec'), scope)\n    assert scope['x'] == 1\n\n\n"
        b"class ScaleCase(unittest.TestCase):\n    def test_scaled(self):\n"
        b"        self.assertEqual(scale(Rect(1, 2), 3), Rect(3, 6))\n"
    ),
    "pyproject.toml": b'[project]\nname = "shapes"\nversion = "1.0"\n',
    "conftest.py": b'pytest_plugins = ["shapes.testing"]\n',
}
TESTS = RepositoryTests(
    fail_to_pass=(
        "tests/test_shapes.py::test_scale",
        "tests/test_shapes.py::ScaleCase::test_scaled",
    ),
    pass_to_pass=(
        "tests/test_shapes.py::test_area",
        "tests/test_shapes.py::test_open_patched",
        "tests/test_shapes.py::test_warning_in_a_thread",
        "tests/test_shapes.py::test_snippet_compiled_under_its_own_name",
        "shapes/__init__.py::shapes",
    ),
    test_files={p: c for p, c in FILES.items() if is_test_path(p)},
    test_command="pytest --doctest-modules shapes",
    timeout_s=60.0,
)


@pytest.mark.parametrize(("ops", "resolved"), [(FIXED, True), (SHAPES, False)], ids=["fix", "bug"])
def test_an_honest_suite_grades_on_its_merits(session_pool, ops, resolved):
    environment = built("python3.11-pytest").request_field()
    files = {**FILES, "shapes/__init__.py": ops}
    result = grade_repository(
        files, TESTS, base=FILES, environment=environment, runtime=session_pool.runtime
    )
    assert result.status == "ok" and result.flags == [], (result.detail, result.stdout_tail)
    assert result.resolved is resolved, (result.per_id, result.messages)
    if not resolved:
        assert {i for i, s in result.per_id.items() if s != "passed"} == set(TESTS.fail_to_pass)
