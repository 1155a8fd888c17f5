"""A worker's next sandboxes boot after it has answered, not inside the request it answers."""

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.grading import local_grader
from sandboxes.runtimes import executor_for
from sandboxes.worker import SandboxWorker, Slot

TESTS = "def check(candidate):\n    assert candidate(3) == 9\n"


def test_the_next_pair_boots_between_requests():
    executor = executor_for("python")
    try:
        assert executor.grader.spare is not None  # booted when the executor started
        request = Q.python_tests("def square(x):\n    return x * x\n", TESTS, "square")
        assert executor.run(request).status == R.OK
        assert executor.grader.spare is None  # nothing booted on that request's path
        slot = Slot(SandboxWorker(runtime="python", concurrency=1), 0)
        slot.executor = executor
        slot._prewarm()  # what the slot does once the answer is on its way
        booted = executor.grader.spare
        assert booted is not None
        assert executor.run(request).status == R.OK
        assert executor.grader.spare is None and booted[0].pid > 0  # that pair served the request
    finally:
        executor.close()


def test_a_grader_used_alone_still_boots_ahead():
    grader = local_grader()
    assert grader.boot_ahead
    grader.grade("def square(x):\n    return x * x\n", TESTS, "square")
    assert grader.spare is not None
