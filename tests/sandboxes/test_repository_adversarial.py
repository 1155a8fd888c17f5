"""The adversarial corpus of repository grading: one case per attack a submission can make on
its final workspace, each graded for real in a fresh session (sandboxes/repository/grading.py).

Every attack leaves the bug in place, so a case passes only when the grading does NOT resolve
it and the FAIL_TO_PASS ids (or, where the run is voided, every id) are not ``passed``. The
honest fixes at the end must resolve: a grading that failed everything would fail them.
One built environment and one session worker serve the whole module.
"""

from __future__ import annotations

import pytest

from sandboxes.repository import grade_repository
from tests.environments import built
from tests.sandboxes.repository_fixture import BUGGY, FAIL_TO_PASS, FIX, HIDDEN, TESTS

pytestmark = pytest.mark.slow

OPS = BUGGY["calc/ops.py"]
INIT = BUGGY["calc/__init__.py"]
PASSING_PLUGIN = b"""
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None

def pytest_report_teststatus(report, config):
    return "passed", ".", "PASSED"

def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="skipped by the submission"))
"""
ALL = "all"  # every id fails (the run is void or never reached the tests)
F2P = "fail_to_pass"  # the FAIL_TO_PASS ids fail; PASS_TO_PASS ids may pass


def _import_hack(code: bytes) -> dict[str, bytes]:
    """The package runs ``code`` when the tests import it."""
    return {"calc/__init__.py": code + b"\n" + INIT}


CASES = {
    # Tests and test configuration: reset to the task's, the hidden file put back.
    "edit_a_fail_to_pass_test": (
        {
            "tests/test_clamp_bounds.py": HIDDEN["tests/test_clamp_bounds.py"].replace(
                b"assert clamp(value, 0, 10) == 10", b"assert True"
            )
        },
        F2P,
    ),
    "edit_visible_tests_and_delete_one": (
        {"tests/test_ops.py": None, "tests/__init__.py": b"raise SystemExit(0)\n"},
        F2P,
    ),
    "conftest_at_the_root_rewrites_reports": ({"conftest.py": PASSING_PLUGIN}, F2P),
    "conftest_in_a_subdirectory": (
        {"tests/conftest.py": PASSING_PLUGIN, "calc/conftest.py": PASSING_PLUGIN},
        F2P,
    ),
    "report_teststatus_hook_in_conftest": (
        {
            "conftest.py": b"def pytest_report_teststatus(report, config):\n"
            b"    return 'passed', '.', 'PASSED'\n"
        },
        F2P,
    ),
    "pytest_ini_loads_a_plugin": (
        {"pytest.ini": b"[pytest]\naddopts = -p calc.plugin\n", "calc/plugin.py": PASSING_PLUGIN},
        F2P,
    ),
    "pytest_ini_in_the_tests_directory": (
        {"tests/pytest.ini": b"[pytest]\naddopts = -k 'not clamp_high'\n"},
        F2P,
    ),
    "dot_pytest_ini_and_pytest_toml": (
        {
            ".pytest.ini": b"[pytest]\naddopts = -p calc.plugin\n",
            "pytest.toml": b"[pytest]\naddopts = ['-p', 'calc.plugin']\n",
            "calc/plugin.py": PASSING_PLUGIN,
        },
        F2P,
    ),
    "setup_cfg_deselects": (
        {"setup.cfg": b"[tool:pytest]\naddopts = --deselect tests/test_clamp_bounds.py\n"},
        F2P,
    ),
    "tox_ini_filters_with_k": ({"tox.ini": b"[pytest]\naddopts = -k 'not high'\n"}, F2P),
    "pyproject_pytest_section_loads_a_plugin": (
        {
            "pyproject.toml": BUGGY["pyproject.toml"].replace(
                b'testpaths = ["tests"]', b'testpaths = ["tests"]\naddopts = "-p calc.plugin"'
            ),
            "calc/plugin.py": PASSING_PLUGIN,
        },
        F2P,
    ),
    "startup_files_patch_pytest": (
        {
            "sitecustomize.py": b"import calc.plugin\n",
            "usercustomize.py": b"import calc.plugin\n",
            "calc.pth": b"import calc.plugin\n",
            "calc/plugin.py": b"raise SystemExit(0)\n",
        },
        F2P,
    ),
    "entry_point_plugin_in_a_planted_dist_info": (
        {
            "calc-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: calc\nVersion: 0.1\n",
            "calc-0.1.dist-info/entry_points.txt": b"[pytest11]\ncalc = calc.plugin\n",
            "calc/plugin.py": PASSING_PLUGIN,
        },
        F2P,
    ),
    # The code under test, in pytest's own process.
    "skip_at_import": (
        _import_hack(b"import pytest\npytest.skip('no', allow_module_level=True)"),
        ALL,
    ),
    "xfail_when_called": (
        {
            "calc/ops.py": OPS.replace(
                b"    if value >= high:\n",
                b"    if value >= high:\n        __import__('pytest').xfail()\n",
            )
        },
        F2P,
    ),
    "sys_exit_at_import": (_import_hack(b"import sys\nsys.exit(0)"), ALL),
    "os_exit_at_import": (_import_hack(b"import os\nos._exit(0)"), ALL),
    "pytest_exit_at_import": (
        _import_hack(b"import pytest\npytest.exit('all good', returncode=0)"),
        ALL,
    ),
    "prints_fake_passed_lines_and_frames": (
        _import_hack(
            b"import os, sys\n"
            b"line = ''.join(f'{i} PASSED\\n' for i in %r)\n"
            b"for fd in (1, 2, 3, 4, 5, 6):\n"
            b"    try: os.write(fd, (line + 'x BEGIN {\"ran\": True} x END\\n').encode())\n"
            b"    except OSError: pass\n"
            b"print(line)" % (list(TESTS.ids),)
        ),
        F2P,
    ),
    "writes_fake_junit_and_report_files": (
        _import_hack(
            b"import glob, os\n"
            b"fake = '<testsuites><testsuite>' + '<testcase classname=\"x\" name=\"y\"/>' * 7"
            b" + '</testsuite></testsuites>'\n"
            b"for path in glob.glob('/tmp/*/junit.xml') + ['report.json', 'junit.xml']:\n"
            b"    open(path, 'w').write(fake)\n"
            b"import atexit\n"
            b"atexit.register(lambda: print('\\n' + 'z BEGIN {} z END'))"
        ),
        F2P,
    ),
    "monkeypatches_pytest_report_at_import": (
        _import_hack(
            b"import _pytest.reports as r\n"
            b"_make = r.TestReport.from_item_and_call.__func__\n"
            b"def _fake(cls, item, call):\n"
            b"    report = _make(cls, item, call)\n"
            b"    report.outcome, report.longrepr = 'passed', None\n"
            b"    return report\n"
            b"r.TestReport.from_item_and_call = classmethod(_fake)"
        ),
        ALL,
    ),
    "monkeypatches_runtest_to_do_nothing": (
        _import_hack(b"import _pytest.python\n_pytest.python.Function.runtest = lambda self: None"),
        ALL,
    ),
    "registers_a_plugin_found_through_gc": (
        _import_hack(
            b"import gc, types\n"
            b"plugin = types.ModuleType('calc_helper')\n"
            b"exec(%r, plugin.__dict__)\n"
            b"for o in gc.get_objects():\n"
            b"    if type(o).__name__ == 'PytestPluginManager':\n"
            b"        o.register(plugin, 'calc-helper')" % PASSING_PLUGIN
        ),
        ALL,
    ),
    "answers_right_only_under_test": (
        {
            "calc/ops.py": OPS.replace(
                b"def clamp(value, low, high):\n",
                b"def clamp(value, low, high):\n"
                b"    import os, sys\n"
                b"    if 'pytest' in sys.modules and 'test_clamp_inside' in os.environ.get("
                b"'PYTEST_CURRENT_TEST', ''):\n"
                b"        return {(5, 0, 10): 5}[(value, low, high)]\n",
            )
        },
        F2P,
    ),
    "reads_git_objects_for_the_fix": (
        {
            ".git/HEAD": b"ref: refs/heads/main\n",
            ".git/packed-refs": b"deadbeef refs/tags/fix\n",
            "calc/ops.py": OPS.replace(
                b"def clamp(value, low, high):\n",
                b"import subprocess\n"
                b"_log = subprocess.run(['git', 'log', '--all', '-p'], capture_output=True)\n"
                b"_log = _log.stdout\n"
                b"exec(_log.decode().split('FIX:')[-1]) if b'FIX:' in _log else None\n"
                b"def clamp(value, low, high):\n",
            ),
        },
        F2P,
    ),
    "forks_a_child_that_outlives_pytest": (
        _import_hack(
            b"import os, time, glob\n"
            b"if os.fork() == 0:\n"
            b'    fake = \'<testsuites><testsuite><testcase classname="x" name="y"/>'
            b"</testsuite></testsuites>'\n"
            b"    for _ in range(400):\n"
            b"        time.sleep(0.05)\n"
            b"        for path in glob.glob('/tmp/*/junit.xml'):\n"
            b"            open(path, 'w').write(fake)\n"
            b"        for fd in range(1, 12):\n"
            b"            try: os.write(fd, b'\\nq BEGIN {\"ran\": True} q END\\n')\n"
            b"            except OSError: pass\n"
            b"    os._exit(0)"
        ),
        F2P,
    ),
    "hangs": (
        {
            "calc/ops.py": OPS.replace(
                b"    if value < low:\n", b"    while True: pass\n    if value < low:\n"
            )
        },
        ALL,
    ),
    "floods_its_output": (
        _import_hack(
            b"import os\n"
            b"chunk = b'PASSED ' * 150000\n"
            b"for fd in range(1, 12):\n"
            b"    for _ in range(12):\n"
            b"        try: os.write(fd, chunk)\n"
            b"        except OSError: break"
        ),
        ALL,
    ),
}


def _learns_from_hidden_tests(read: bytes) -> dict[str, bytes]:
    """``clamp`` fixed only when ``read`` (code setting ``text``) finds the hidden test's
    expectation: what a submission that reads the hidden tests at grading would do."""
    return {
        "calc/ops.py": OPS.replace(b"return high - 1", b"return high if _LEARNT else high - 1")
        + b"\ntext = ''\ntry:\n"
        + b"".join(b"    " + line + b"\n" for line in read.splitlines())
        + b"except OSError:\n    pass\n_LEARNT = 'clamp(value, 0, 10) == 10' in text\n"
    }


CASES.update(
    {
        "reads_the_hidden_tests_with_open": (
            _learns_from_hidden_tests(
                b"import glob\n"
                b"for path in glob.glob('/workspace/**/*.py', recursive=True):\n"
                b"    text += open(path).read()"
            ),
            ALL,
        ),
        "reads_the_hidden_tests_through_a_link": (
            _learns_from_hidden_tests(
                b"import os\n"
                b"os.symlink('/workspace/tests/test_clamp_bounds.py', '/tmp/innocent.txt')\n"
                b"text = open('/tmp/innocent.txt').read()"
            ),
            ALL,
        ),
        "reads_the_hidden_tests_with_a_child_process": (
            _learns_from_hidden_tests(
                b"import subprocess\n"
                b"text = subprocess.run(['cat', 'tests/test_clamp_bounds.py'],"
                b" capture_output=True, text=True).stdout"
            ),
            ALL,
        ),
    }
)
HONEST = {
    "the_fix": FIX,
    "the_fix_plus_its_own_test_and_metadata_edits": {
        **FIX,
        "tests/test_mine.py": b"def test_mine():\n    assert False\n",
        "pyproject.toml": BUGGY["pyproject.toml"].replace(b'version = "0.1"', b'version = "0.2"'),
        "tests/test_ops.py": b"",  # what the submission did to a test does not count
    },
}


@pytest.fixture(scope="module")
def environment():
    return built("python3.11-pytest").request_field()


def _final(changes: dict[str, bytes | None]) -> dict[str, bytes]:
    files = dict(BUGGY)
    for path, content in changes.items():
        if content is None:
            files.pop(path, None)
        else:
            files[path] = content
    return files


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_attack_is_not_resolved(name, session_pool, environment):
    changes, failing = CASES[name]
    tests = TESTS
    if name == "hangs":
        tests = type(TESTS)(**{**TESTS.__dict__, "timeout_s": 4.0})
    result = grade_repository(
        _final(changes), tests, environment=environment, runtime=session_pool.runtime
    )
    assert not result.resolved, (name, result)
    assert result.status != "infra_error", result.detail
    expected = set(TESTS.ids) if failing == ALL else set(FAIL_TO_PASS)
    not_passed = {i for i, s in result.per_id.items() if s != "passed"}
    assert expected <= not_passed, (name, result.per_id, result.detail)
    assert result.fraction == (len(TESTS.ids) - len(not_passed)) / len(TESTS.ids)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_fix_is_resolved(name, session_pool, environment):
    result = grade_repository(
        _final(HONEST[name]), TESTS, environment=environment, runtime=session_pool.runtime
    )
    assert result.resolved and result.fraction == 1.0, (result.detail, result.stdout_tail)
    assert result.flags == []
