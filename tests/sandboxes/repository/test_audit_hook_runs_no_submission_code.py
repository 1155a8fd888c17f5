"""The repository grading's audit hook never runs code the submission controls
(``sandboxes/harness/grading_trust.py``, ``grading_guard.py``): while the hook handles an event
nothing is refused, so code of the submission's running there could walk up to the enclave and
sign a forged answer. Each case below tries one route into the hook and, once inside, forges the
answer (every id passed); graded with the first line alone (no differential), none may resolve
the task:

- a standard-library function the hook used to call, rebound (``os.lstat`` under
  ``os.path.realpath``, ``os.fspath`` under ``os.path.normpath``);
- a builtin the hook calls by name, rebound in ``builtins``;
- another thread's code while a handler runs (the hook's state is per thread);
- an event argument whose own methods run when the hook reads it: a ``str`` subclass as a file
  name, an object whose ``__class__`` property answers ``isinstance``, one whose ``__getattr__``
  answers a frame attribute, a metaclass whose ``__eq__`` answers ``in``;
- a path object of the code's own handed to ``io.FileIO`` (its ``__fspath__``), naming a hidden
  test file: refused.
"""

from __future__ import annotations

import pytest

from sandboxes.repository import grade_repository
from tests.environments import built
from tests.sandboxes.repository.attacks import HIDDEN_PATH, at_import
from tests.sandboxes.repository.attacks_second_round import FORGE
from tests.sandboxes.repository.corpus_task import BUGGY, TESTS, final

pytestmark = pytest.mark.slow

# Called from wherever the route leads: inside the hook it finds the enclave and sends a forged
# answer; elsewhere its frame walk is refused, and it lets the code it stands in for go on.
SPY = (
    FORGE
    + """
import sys as _sys
def _spy():
    try:
        frame = _sys._getframe(1)
    except BaseException:
        return
    while frame is not None:
        owner = frame.f_locals.get('self')
        if type(owner).__name__ == 'Enclave' and hasattr(owner, 'token'):
            _send(owner)
        frame = frame.f_back
"""
)


def rebound(module: str, name: str, then: str) -> str:
    """``module.name`` replaced by a stand-in that calls the spy first; ``then`` runs after."""
    return (
        f"import {module}\n_kept = {module}.{name}\n"
        "def _stand_in(*args, **kwargs):\n    _spy()\n    return _kept(*args, **kwargs)\n"
        f"{module}.{name} = _stand_in\n{then}\n"
    )


OPEN_A_FILE = "open('/workspace/calc/ops.py').close()"
ROUTES = {
    "os_lstat_rebound": rebound(
        "os", "lstat", "exec(compile('x = 1', '/tmp/a-new-name-%d.py' % os.getpid(), 'exec'))"
    ),
    "os_fspath_rebound": rebound("os", "fspath", OPEN_A_FILE),
    "builtin_any_rebound": rebound("builtins", "any", OPEN_A_FILE),
    # another thread, whose events used to go unhandled while this one's handler ran:
    "another_thread_while_a_handler_runs": """
import gc, threading
def _race():
    for _ in range(20000):
        try:
            found = gc.get_objects()
        except BaseException:
            continue
        for thing in found:
            if type(thing).__name__ == 'Enclave' and hasattr(thing, 'token'):
                _send(thing)
threading.Thread(target=_race, daemon=True).start()
""",
    "str_subclass_file_name": """
class _Name(str):
    def startswith(self, *args):
        _spy()
        return str.startswith(self, *args)
    def __eq__(self, other):
        _spy()
        return str.__eq__(self, other)
    __hash__ = str.__hash__
exec(compile('x = 1', _Name('/tmp/named.py'), 'exec'))
""",
    "class_property_answers_isinstance": """
class _Liar:
    @property
    def __class__(self):
        _spy()
        return int
try:
    _sys.audit('open', _Liar(), 'r', 0)
except Exception:
    pass
""",
    "getattr_answers_a_frame_attribute": """
class _Meta(type):
    def __eq__(cls, other):
        _spy()
        return type.__eq__(cls, other)
    __hash__ = type.__hash__
class _Holder(metaclass=_Meta):
    def __getattr__(self, name):
        _spy()
        raise AttributeError(name)
try:
    _sys.audit('object.__getattr__', _Holder(), 'tb_frame')
except Exception:
    pass
""",
}

HIDDEN_BY_PATH_OBJECT = f"""
import io
class _Where:
    def __fspath__(self):
        return {HIDDEN_PATH!r}
try:
    with io.FileIO(_Where()) as handle:
        _HIDDEN = handle.read()
except Exception:
    _HIDDEN = None
"""


@pytest.fixture(scope="module")
def environment(session_pool):
    return built("python3.11-pytest").request_field(), session_pool.runtime


def grade(code: str, environment):
    request, runtime = environment
    return grade_repository(
        final(at_import(code)), TESTS, base=BUGGY, environment=request, runtime=runtime
    )


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_code_that_reaches_the_hook_cannot_forge_the_answer(route, environment):
    result = grade(SPY + ROUTES[route], environment)
    assert result.status != "infra_error", result.detail
    assert not result.resolved, (route, result.per_id, result.flags, result.detail)
    assert result.fail_to_pass_fraction < 1.0


def test_a_hidden_test_named_by_a_path_object_of_its_own_is_refused(environment):
    result = grade(HIDDEN_BY_PATH_OBJECT, environment)
    assert not result.resolved
    assert "refused_operation" in result.flags, (result.flags, result.detail)
    assert "naming a file by an object of its own" in result.detail
