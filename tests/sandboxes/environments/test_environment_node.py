"""Node.js packages: pinned, installed by ``npm ci`` from a lock file into the store, on the
sandbox's NODE_PATH read-only; without the environment the same program cannot find them; a
package that does not exist is named."""

from __future__ import annotations

import pytest

from sandboxes import result as R
from sandboxes.environments.build import materialise
from sandboxes.environments.mount import mount_for
from sandboxes.environments.spec import parse
from sandboxes.environments.store import EnvironmentBuildError, EnvironmentStore
from sandboxes.javascript import NodeGrader

PROGRAM = (
    "const leftPad = require('left-pad');\nfunction pad(s) {\n  return leftPad(s, 5, '0');\n}\n"
)
TESTS = "console.assert(pad('7') === '00007');\nconsole.assert(pad('12345') === '12345');\n"


@pytest.fixture(scope="module")
def left_pad():
    return materialise(parse("node20", ["left-pad@1.3.0"]))


def test_a_pinned_npm_package_is_installed_from_its_lock(left_pad):
    record = left_pad.packages.record
    assert record["resolved"] == [{"name": "left-pad", "version": "1.3.0"}]
    assert (left_pad.packages.tree / "package-lock.json").exists()
    assert "npm ci" in record["log"]


def test_the_program_requires_it_in_its_environment_only(left_pad):
    inside = NodeGrader(mount_for(left_pad.request_field(), family="node"))
    bare = NodeGrader()
    try:
        ok = inside.grade(PROGRAM, TESTS, "pad")
        missing = bare.grade(PROGRAM, TESTS, "pad")
        hostile = inside.grade(
            "const fs = require('fs');\n"
            "try { fs.writeFileSync('/env/node_modules/left-pad/index.js', 'x'); } catch (e) {}\n"
            + PROGRAM,
            TESTS,
            "pad",
        )
    finally:
        inside.close()
        bare.close()
    assert ok.status == R.OK, ok.stderr
    assert missing.status != R.OK
    assert all("Cannot find module 'left-pad'" in t.error for t in missing.tests), missing.tests
    assert hostile.status == R.OK  # the write failed: the environment is read-only
    EnvironmentStore(left_pad.packages.path.parent).verify(left_pad.packages.hash)


def test_an_npm_package_that_does_not_exist_is_named():
    with pytest.raises(EnvironmentBuildError) as caught:
        materialise(parse("node20", ["crucible-no-such-package-7f3a@1.0.0"]))
    assert caught.value.kind == "missing_package"
    assert "crucible-no-such-package-7f3a" in str(caught.value)
