"""Runtimes a sandbox can execute: the executor that serves each queue, in which environment.

A runtime is a plug-in: adding one (a second Python, Node.js) means adding its interpreter
lookup (:mod:`sandboxes.interpreters`) and an executor class here, and naming it in
``EXECUTORS``; ``sandbox_worker --runtime NAME`` then serves it.
"""

from __future__ import annotations

from sandboxes.interpreters import RuntimeUnavailable


class PythonExecutor:
    """Runs ``python_tests`` requests in warm :class:`~sandboxes.grading.PythonGrader` s: one
    for the runtime's bare environment (booted at start), and one per environment a request
    names (``payload["environment"]``, see :mod:`sandboxes.environments`), started on first
    use and kept for the next :data:`KEEP_ENVIRONMENTS` environments."""

    kinds = ("python_tests",)
    family = "python"
    runtime = "python"  # the queue it serves
    KEEP_ENVIRONMENTS = 4

    def __init__(self) -> None:
        self.grader = self.make_grader(self.bare_mount())
        self.grader.boot_ahead = False  # the worker calls prewarm() once it has answered
        self.grader.prewarm()
        self.by_environment: dict[str, object] = {}

    @classmethod
    def bare_mount(cls):
        """The environment of requests that name none (the host's Python)."""
        from sandboxes.environments.mount import HOST  # noqa: PLC0415 (stdlib-only module)

        return HOST

    @staticmethod
    def make_grader(mount):
        """This runtime's resident grader (a :class:`~sandboxes.pairs.WarmGrader`) in
        ``mount``, not yet booted."""
        from sandboxes.grading import PythonGrader  # noqa: PLC0415 (a worker's; EXECUTORS is read without)

        return PythonGrader(mount)

    def grader_for(self, environment: dict | None):
        """The warm grader of a request's environment (the bare one when it names none).

        Raises:
            EnvironmentCorrupt: the environment is not built on this worker or differs from
                its manifest.
        """
        from sandboxes.environments.mount import mount_for  # noqa: PLC0415 (stdlib-only module)

        if not environment or not (environment.get("root") or environment.get("packages")):
            return self.grader
        key = str(environment.get("key"))
        if key == self.grader.mount.key:  # the runtime's own root, already warm
            return self.grader
        grader = self.by_environment.pop(key, None)
        if grader is None:
            grader = self.make_grader(mount_for(environment, family=self.family))
            if len(self.by_environment) >= self.KEEP_ENVIRONMENTS:
                oldest = next(iter(self.by_environment))
                self.by_environment.pop(oldest).close()
        self.by_environment[key] = grader  # most recently used last
        return grader

    def prewarm(self) -> None:
        """Boot the sandboxes of the next request now (call it between requests).

        Raises:
            ZygoteDied: a resident sandbox could not start.
        """
        self.grader.prewarm()

    def run(self, request: dict):
        """Execute one queued request (its sandboxes are booted here if :meth:`prewarm` was not
        called).

        Raises:
            ZygoteDied: the sandbox died (the worker requeues the request).
            ValueError: the request's kind is not one this runtime runs.
        """
        # The grader's modules, this one with them, run on the standard library alone
        # (tests/sandboxes/test_not_root.py grades with the system's Python).
        from sandboxes.queue import request_limits  # noqa: PLC0415 (it needs redis and Django)

        if request.get("kind") not in self.kinds:
            raise ValueError(
                f"this runtime runs {', '.join(self.kinds)}, not {request.get('kind')!r}"
            )
        payload = request["payload"]
        extra = (
            {"files": payload["files"], "verifier": payload["verifier"]}
            if "verifier" in payload
            else {}
        )
        if payload.get("setup"):
            extra["setup"] = payload["setup"]
        result = self.grader_for(payload.get("environment")).grade(
            payload["program"],
            payload["tests"],
            payload["entry_point"],
            prompt=payload.get("prompt", ""),
            limits=request_limits(request),
            **extra,
        )
        result.environment = environment_key(payload.get("environment"), self.runtime)
        return result

    def close(self) -> None:
        self.grader.close()
        for grader in self.by_environment.values():
            grader.close()
        self.by_environment.clear()


def environment_key(environment: dict | None, runtime: str) -> str:
    """What a result records it ran in: the environment's build key, else the bare runtime."""
    if environment and environment.get("key"):
        return str(environment["key"])
    return f"host-{runtime}"


class RootPythonExecutor(PythonExecutor):
    """A Python that is not the host's: every grader runs in its Debian root filesystem
    (:mod:`sandboxes.environments.debian`), built into the store on first use."""

    @classmethod
    def bare_mount(cls):
        """The runtime's Debian root, built into the store on first use.

        Raises:
            RuntimeUnavailable: the root cannot be built here (the build's error).
        """
        from sandboxes.environments.build import materialise  # noqa: PLC0415 (needs packaging)
        from sandboxes.environments.mount import mount_for  # noqa: PLC0415 (stdlib-only module)
        from sandboxes.environments.spec import parse  # noqa: PLC0415 (needs packaging)
        from sandboxes.environments.store import EnvironmentBuildError  # noqa: PLC0415

        try:
            built = materialise(parse(cls.runtime, []))
        except EnvironmentBuildError as exc:
            raise RuntimeUnavailable(f"runtime {cls.runtime}: {exc}") from exc
        return mount_for(built.request_field(), family=cls.family)


class NodeExecutor(PythonExecutor):
    """Runs ``javascript_tests`` requests in a pre-warmed
    :class:`~sandboxes.javascript.NodeGrader`."""

    kinds = ("javascript_tests",)
    family = "node"
    runtime = "node"

    @staticmethod
    def make_grader(mount):
        from sandboxes.javascript import NodeGrader  # noqa: PLC0415 (as PythonGrader above)

        return NodeGrader(mount)


class Python313Executor(RootPythonExecutor):
    runtime = "python3.13"


EXECUTORS = {"python": PythonExecutor, "node": NodeExecutor, "python3.13": Python313Executor}


def base_runtime(runtime: str) -> str:
    """The runtime of a queue name: ``python@<key>`` (one environment's own queue, see
    ``CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT``) is served by the ``python`` runtime."""
    return runtime.split("@", 1)[0]


def builds_own_root(runtime: str) -> bool:
    """Whether ``runtime`` (a queue name) runs in a root of its own, built into the store on its
    worker's first start (``python3.13``: a Debian root by mmdebstrap, a minute or more), not
    in the host's (``python``, ``node``)."""
    executor = EXECUTORS.get(base_runtime(runtime))
    return executor is not None and issubclass(executor, RootPythonExecutor)


def runtime_mount(runtime: str):
    """The bare environment of a sandbox runtime (queue name): the host's for ``python`` and
    ``node``, the runtime's own root (built on first use) for one like ``python3.13``.

    Raises:
        RuntimeUnavailable: the runtime's root cannot be built here.
    """
    if not builds_own_root(runtime):
        from sandboxes.environments.mount import HOST  # noqa: PLC0415 (stdlib-only module)

        return HOST
    return EXECUTORS[base_runtime(runtime)].bare_mount()


def executor_for(runtime: str):
    """A fresh, started executor for ``runtime``.

    Raises:
        ValueError: no such runtime (the message lists the known ones).
        RuntimeUnavailable: the runtime's interpreter is missing here.
    """
    try:
        return EXECUTORS[base_runtime(runtime)]()
    except KeyError:
        raise ValueError(
            f"unknown sandbox runtime {runtime!r}; known: {', '.join(sorted(EXECUTORS))}"
        ) from None
