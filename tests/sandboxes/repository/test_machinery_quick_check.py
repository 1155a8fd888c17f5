"""The repository grading's check of the test machinery after every test
(``sandboxes/harness/grading_trust.py``, ``Machinery.changes``) takes a quick path when nothing
changed since its last full walk: it must find exactly what the full walk finds, whatever was
changed (a module's global, a class attribute, a closure cell, a function's code or defaults,
a hook, a name pytest sets at every test), and must not walk when nothing changed.

Run in a child interpreter: the audit hook that counts function writes (as the grading's own
hook does) cannot be removed once added."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import importlib, json, sys, types
import _pytest.config, pytest, unittest.mock
for plugin in _pytest.config.default_plugins:
    importlib.import_module("_pytest." + plugin)
import _pytest.assertion.util as util, _pytest.python, _pytest.runner, pluggy

from sandboxes.harness.grading_trust import Machinery, Trust

writes = []


def hook(event, args):
    if event == "object.__setattr__" and isinstance(args[0], types.FunctionType):
        writes.append(args[1])


sys.addaudithook(hook)
trust = Trust([], [], 0)
full = Machinery(trust)  # no function writes told: every check walks everything
quick = Machinery(trust, learned=full, function_writes=writes)
walks = []
walk = quick._changed
quick._changed = lambda: walks.append(1) or walk()
steps = []


def step(name):
    before = len(walks)
    expected, found = full.changes(), quick.changes()
    steps.append({"step": name, "full": expected, "quick": found, "walked": len(walks) > before})


step("nothing")
step("nothing again")
original_call = _pytest.runner.call_and_report
_pytest.runner.call_and_report = lambda *args, **kwargs: None
step("global rebound")
step("global rebound, unchanged since")
_pytest.runner.call_and_report = original_call
step("global restored")
original_runtest = _pytest.python.Function.runtest
_pytest.python.Function.runtest = lambda self: None
step("class attribute")
_pytest.python.Function.runtest = original_runtest
step("class attribute restored")
_pytest.runner.planted = 1
step("name added")
del _pytest.runner.planted
step("name removed")
# a function of the machinery with a closure: its cell's contents replaced, then restored
target = next(
    value
    for module in full.modules.values()
    for value in vars(module).values()
    if isinstance(value, types.FunctionType)
    and value.__closure__
    and all(c.cell_contents is not None for c in value.__closure__)
)
cell = target.__closure__[0]
kept = cell.cell_contents
cell.cell_contents = object()
step("closure cell")
cell.cell_contents = kept
step("closure cell restored")
code = _pytest.runner.show_test_item.__code__
_pytest.runner.show_test_item.__code__ = (lambda item: None).__code__
step("function code")
_pytest.runner.show_test_item.__code__ = code
step("function code restored")
defaults = _pytest.runner.call_and_report.__defaults__
_pytest.runner.call_and_report.__defaults__ = (False,)
step("function defaults")
_pytest.runner.call_and_report.__defaults__ = defaults
step("function defaults restored")
# a name pytest sets at every test (a fresh function each time), then a foreign value in it
kept_repr = util._reprcompare
for index in range(3):
    util._reprcompare = eval("lambda *args: None")
    step(f"per-test name {index}")
util._reprcompare = types.SimpleNamespace()
step("per-test name, a foreign value")
util._reprcompare = kept_repr
step("per-test name restored")
sys.setprofile(lambda *args: None)
step("profile hook")
sys.setprofile(None)
step("profile hook removed")


class Planted:
    pass


Planted.__module__ = "_pytest.runner"
_pytest.runner.Planted = Planted
step("class planted")
Planted.run = lambda self: None
step("class planted, attribute added")
del _pytest.runner.Planted
step("class removed")
pluggy.HookCaller = type("HookCaller", (), {})
step("pluggy class replaced")
print(json.dumps(steps))
"""


def test_the_quick_path_finds_what_the_full_walk_finds_and_walks_only_on_change():
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    steps = {s["step"]: s for s in json.loads(done.stdout.splitlines()[-1])}
    for name, found in steps.items():
        assert found["quick"] == found["full"], (name, found)
    flagged = {name: set(found["full"]) for name, found in steps.items()}
    assert flagged["nothing"] == set() and flagged["global restored"] == set()
    assert "_pytest.runner.call_and_report" in flagged["global rebound"]
    assert "_pytest.python.Function.runtest" in flagged["class attribute"]
    assert "_pytest.runner.planted" in flagged["name added"]
    assert any(key.endswith("()") for key in flagged["closure cell"])
    assert "_pytest.runner.show_test_item()" in flagged["function code"]
    assert "_pytest.runner.call_and_report()" in flagged["function defaults"]
    assert "_pytest.assertion.util._reprcompare" in flagged["per-test name, a foreign value"]
    assert "sys.getprofile()" in flagged["profile hook"]
    assert "_pytest.runner.Planted.run" in flagged["class planted, attribute added"]
    assert "pluggy.HookCaller" in flagged["pluggy class replaced"]
    for name in ("closure cell restored", "function code restored", "profile hook removed"):
        assert flagged[name] == set(), (name, flagged[name])
    # it walks only when something changed: never twice for the same state
    assert not steps["nothing again"]["walked"]
    assert not steps["global rebound, unchanged since"]["walked"]
    assert steps["global rebound"]["walked"] and steps["function code"]["walked"]
    assert steps["closure cell"]["walked"] and steps["function defaults"]["walked"]
    # a name the last walk found changed is read again without a walk
    assert not steps["per-test name 2"]["walked"]
