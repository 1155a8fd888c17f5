"""The kubernetes backend and the reconcile loop, through the official client over HTTP against
kmock.

kmock's ``KubernetesEmulator`` stores, serves, patches and deletes objects like an API
server, but runs no controllers: no Job controller makes pods, no kubelet reports them,
no garbage collector follows ``propagationPolicy``, and list calls ignore label
selectors. The :class:`Cluster` helpers below play that side of the cluster by writing
pods and Job statuses through the same API, as the controllers would. The code under
test talks to kmock with the real ``kubernetes`` client; nothing of it is mocked.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from io import StringIO

import kmock
import pytest
from django.core.management import CommandError, call_command
from kubernetes import client

from console.celery import app
from tests.training.conftest import one_task_run
from training import kubernetes as k8s
from training.backends import run_cancel
from training.config import ConfigError
from training.models import TrainingRun
from training.reconcile import runs_reconcile
from training.services import InvalidTransition, run_transition
from training.tasks import run_launch

IMAGE = "registry.example.com/crucible:1.0"
NS = "rl"


class Cluster:
    """kmock served from a thread (the backend's client is synchronous), plus a cluster's
    controllers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="kmock", daemon=True)
        self.thread.start()
        self._call(self._enter())
        self.url = str(self.server.url).rstrip("/")
        configuration = client.Configuration()
        configuration.host = self.url
        self.api = client.ApiClient(configuration)
        self.batch, self.core = client.BatchV1Api(self.api), client.CoreV1Api(self.api)

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _enter(self) -> None:
        self.handler = kmock.KubernetesEmulator()
        # The resources this cluster serves (kmock answers 404 for a list of an undeclared, empty
        # one).
        verbs = {"create", "delete", "get", "list", "patch", "watch"}
        self.handler.resources["v1/pods"] = kmock.ResourceInfo(
            kind="Pod", namespaced=True, verbs=verbs, subresources={"status"}
        )
        self.handler.resources["batch/v1/jobs"] = kmock.ResourceInfo(
            kind="Job", namespaced=True, verbs=verbs, subresources={"status"}
        )
        await self.handler.__aenter__()
        self.server = kmock.Server(self.handler)
        await self.server.__aenter__()

    async def _exit(self) -> None:
        await self.server.__aexit__(None, None, None)
        await self.handler.__aexit__(None, None, None)

    def close(self) -> None:
        self._call(self._exit())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.api.close()

    # --- reading, as raw JSON over HTTP -------------------------------------------------
    def get(self, path: str) -> dict | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def job(self, name: str) -> dict | None:
        return self.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")

    def pods(self) -> list[str]:
        return sorted(
            p["metadata"]["name"] for p in self.get(f"/api/v1/namespaces/{NS}/pods")["items"]
        )

    def requests(self, method: str, path_part: str) -> list:
        return [
            r
            for r in list(self.handler)
            if r.method.value.upper() == method and path_part in r.url.path
        ]

    # --- the Job controller and the kubelet, played through the API -----------------------
    def start_pod(self, job_name: str) -> str:
        """What the Job controller and kubelet do: a pod from the template, labelled and owned,
        Running."""
        job = self.job(job_name)
        pod_name = f"{job_name}-x7k2p"
        labels = {
            **job["spec"]["template"]["metadata"]["labels"],
            "job-name": job_name,
            "batch.kubernetes.io/job-name": job_name,
        }
        self.core.create_namespaced_pod(
            NS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": NS,
                    "labels": labels,
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job_name,
                            "uid": "0000",
                            "controller": True,
                        }
                    ],
                },
                "spec": job["spec"]["template"]["spec"],
            },
        )
        self.core.patch_namespaced_pod_status(
            pod_name,
            NS,
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "trainer",
                            "image": IMAGE,
                            "imageID": "",
                            "ready": True,
                            "restartCount": 0,
                            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                        }
                    ],
                }
            },
        )
        self.batch.patch_namespaced_job_status(job_name, NS, {"status": {"active": 1, "ready": 1}})
        return pod_name

    def kill_pod(
        self, job_name: str, pod_name: str, *, reason: str, exit_code: int, pod_reason: str = ""
    ) -> None:
        """The kubelet reports the container's end; the Job controller fails the Job (backoffLimit
        0)."""
        status = {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": IMAGE,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"reason": reason, "exitCode": exit_code}},
                }
            ],
        }
        if pod_reason:
            status.update(reason=pod_reason, message="The node was low on resource: memory.")
        self.core.patch_namespaced_pod_status(pod_name, NS, {"status": status})
        self.fail_job(
            job_name, "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        )

    def fail_job(self, job_name: str, reason: str, message: str) -> None:
        self.batch.patch_namespaced_job_status(
            job_name,
            NS,
            {
                "status": {
                    "active": 0,
                    "failed": 1,
                    "conditions": [
                        {
                            "type": "FailureTarget",
                            "status": "True",
                            "reason": reason,
                            "message": message,
                        },
                        {"type": "Failed", "status": "True", "reason": reason, "message": message},
                    ],
                }
            },
        )

    def complete_job(self, job_name: str) -> None:
        self.batch.patch_namespaced_job_status(
            job_name,
            NS,
            {
                "status": {
                    "active": 0,
                    "succeeded": 1,
                    "conditions": [
                        {"type": "SuccessCriteriaMet", "status": "True"},
                        {"type": "Complete", "status": "True"},
                    ],
                }
            },
        )


@pytest.fixture
def cluster():
    cluster = Cluster()
    k8s.api_client_set(client.ApiClient(_configuration(cluster.url)))
    yield cluster
    k8s.api_client_set(None)
    cluster.close()


def _configuration(host: str) -> client.Configuration:
    configuration = client.Configuration()
    configuration.host = host
    return configuration


@pytest.fixture
def eager_celery():
    """Celery's own test mode: the launch the reconcile loop dispatches runs here, in-process."""
    before = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = before


def make_run(backend: str = "kubernetes", **config) -> TrainingRun:
    return one_task_run(backend, **config)


def k8s_config(**spec) -> dict:
    return {"kubernetes": {"image": IMAGE, "namespace": NS, **spec}}


def transitions(run: TrainingRun) -> list[tuple[str, str]]:
    return list(run.transitions.values_list("from_status", "to_status"))


def trainer_starts(run: TrainingRun) -> None:
    """What the trainer does first in its pod (training.trainer.train_run)."""
    run_transition(run_id=run.pk, to_status=TrainingRun.RUNNING, reason="trainer started")


@pytest.mark.django_db
def test_launch_creates_the_job_with_the_spec(cluster):
    run = make_run(
        **k8s_config(
            cpu="4",
            memory="16Gi",
            gpus=2,
            env_secret="crucible-env",
            service_account="trainer",
            node_selector={"pool": "gpu"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            active_deadline_seconds=7200,
        )
    )
    run_launch(run.pk)  # the Celery task's body: BACKENDS["kubernetes"].launch
    run.refresh_from_db()
    name = f"crucible-run-{run.pk}-1"
    assert run.status == TrainingRun.LAUNCHING and run.backend_ref == f"job:{NS}/{name}"
    job = cluster.job(name)
    assert job["metadata"]["labels"]["crucible.dev/run-id"] == str(run.pk)
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "trainer"
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert job["spec"]["template"]["metadata"]["labels"]["crucible.dev/run-id"] == str(run.pk)
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["python", "manage.py", "run_trainer", str(run.pk)]
    assert container["envFrom"] == [{"secretRef": {"name": "crucible-env"}}]
    assert container["resources"] == {
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
    }
    # it went over HTTP, once: a redelivered launch message creates nothing more
    run_launch(run.pk)
    assert len(cluster.requests("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")) == 1
    assert transitions(run) == [("", "pending"), ("pending", "launching")]


@pytest.mark.django_db
def test_pod_oomkilled_interrupts_and_resumes_as_attempt_2(cluster, eager_celery):
    run = make_run(**k8s_config())
    run_launch(run.pk)
    first = f"crucible-run-{run.pk}-1"
    pod = cluster.start_pod(first)
    trainer_starts(run)
    assert runs_reconcile() == {run.pk: "active"}
    run.refresh_from_db()
    assert run.status == TrainingRun.RUNNING

    cluster.kill_pod(first, pod, reason="OOMKilled", exit_code=137)
    assert runs_reconcile() == {run.pk: "resumed"}
    run.refresh_from_db()
    assert transitions(run)[-2:] == [("running", "interrupted"), ("interrupted", "launching")]
    interrupted = run.transitions.get(to_status="interrupted").reason
    assert (
        "OOMKilled" in interrupted
        and "exit code 137" in interrupted
        and "BackoffLimitExceeded" in interrupted
    )
    assert run.summary["resumes"] == 1
    second = f"crucible-run-{run.pk}-2"
    assert run.status == TrainingRun.LAUNCHING and run.backend_ref == f"job:{NS}/{second}"
    assert cluster.job(second)["spec"]["template"]["spec"]["containers"][0]["command"][-1] == str(
        run.pk
    )
    assert cluster.job(second)["metadata"]["labels"]["crucible.dev/attempt"] == "2"
    # the failed attempt's Job and pod are cleaned up before the new one runs
    assert cluster.job(first) is None and cluster.pods() == []
    # the new attempt runs: the loop leaves it alone
    cluster.start_pod(second)
    assert runs_reconcile() == {run.pk: "active"}


@pytest.mark.django_db
def test_eviction_is_named_in_the_reason(cluster, eager_celery):
    run = make_run(**k8s_config(), resume_on_interrupt=False)
    run_launch(run.pk)
    name = f"crucible-run-{run.pk}-1"
    pod = cluster.start_pod(name)
    trainer_starts(run)
    cluster.kill_pod(name, pod, reason="Error", exit_code=143, pod_reason="Evicted")
    assert runs_reconcile() == {run.pk: "failed"}
    run.refresh_from_db()
    assert "Evicted" in run.transitions.get(to_status="interrupted").reason
    assert run.status == TrainingRun.FAILED and "resume_on_interrupt is off" in run.status_reason


@pytest.mark.django_db
def test_a_pod_that_cannot_pull_its_image_ends_the_attempt_and_is_removed(cluster, eager_celery):
    run = make_run(**k8s_config(), max_resumes=0)
    run_launch(run.pk)
    name = f"crucible-run-{run.pk}-1"
    pod = cluster.start_pod(name)
    cluster.core.patch_namespaced_pod_status(
        pod,
        NS,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "image": IMAGE,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": "Back-off pulling image",
                            }
                        },
                    }
                ],
            }
        },
    )
    assert runs_reconcile() == {run.pk: "failed"}
    run.refresh_from_db()
    assert (
        "ImagePullBackOff" in run.status_reason
        and "resumes exhausted (0 of max_resumes=0" in run.status_reason
    )
    assert (
        cluster.job(name) is None and cluster.pods() == []
    )  # the stuck pod no longer holds its node


@pytest.mark.django_db
def test_job_failure_with_resumes_exhausted_fails_with_the_reason(cluster, eager_celery):
    run = make_run(**k8s_config(active_deadline_seconds=60), max_resumes=1)
    run_launch(run.pk)
    cluster.fail_job(
        f"crucible-run-{run.pk}-1",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert runs_reconcile() == {run.pk: "resumed"}  # resume 1 of 1
    run.refresh_from_db()
    assert run.summary["resumes"] == 1 and run.backend_ref.endswith("-2")

    cluster.fail_job(
        f"crucible-run-{run.pk}-2",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert runs_reconcile() == {run.pk: "failed"}
    run.refresh_from_db()
    assert run.status == TrainingRun.FAILED
    assert "resumes exhausted (1 of max_resumes=1 used)" in run.status_reason
    assert "DeadlineExceeded" in run.status_reason
    assert cluster.job(f"crucible-run-{run.pk}-3") is None  # no third attempt
    assert runs_reconcile() == {}  # a failed run is final


@pytest.mark.django_db
def test_vanished_job_interrupts_and_a_silent_success_fails(cluster, eager_celery):
    vanished = make_run(**k8s_config(), resume_on_interrupt=False)
    silent = make_run(**k8s_config())
    honest = make_run(**k8s_config())
    for run in (vanished, silent, honest):
        run_launch(run.pk)
        trainer_starts(run)
    cluster.batch.delete_namespaced_job(
        f"crucible-run-{vanished.pk}-1", NS
    )  # someone ran kubectl delete
    cluster.complete_job(f"crucible-run-{silent.pk}-1")
    cluster.complete_job(f"crucible-run-{honest.pk}-1")
    run_transition(run_id=honest.pk, to_status=TrainingRun.SUCCEEDED, reason="trained 3 steps")

    assert runs_reconcile() == {vanished.pk: "failed", silent.pk: "failed"}
    vanished.refresh_from_db(), silent.refresh_from_db(), honest.refresh_from_db()
    assert "is gone" in vanished.transitions.get(to_status="interrupted").reason
    assert silent.status == TrainingRun.FAILED
    assert "the trainer exited without recording success" in silent.status_reason
    assert honest.status == TrainingRun.SUCCEEDED and honest.status_reason == "trained 3 steps"


@pytest.mark.django_db
def test_an_unreachable_api_changes_no_run(cluster):
    run = make_run(**k8s_config())
    run_launch(run.pk)
    trainer_starts(run)
    k8s.api_client_set(
        client.ApiClient(_configuration("http://127.0.0.1:9"))
    )  # nothing listens there
    assert runs_reconcile() == {run.pk: "error"}
    run.refresh_from_db()
    assert run.status == TrainingRun.RUNNING  # an infrastructure error is not a lost trainer


@pytest.mark.django_db
def test_cancel_deletes_the_job_and_its_pods_and_is_safe_twice(cluster):
    run = make_run(**k8s_config())
    other = make_run(**k8s_config())
    run_launch(run.pk)
    run_launch(other.pk)
    name = f"crucible-run-{run.pk}-1"
    cluster.start_pod(name)
    other_pod = cluster.start_pod(f"crucible-run-{other.pk}-1")
    trainer_starts(run)

    assert run_cancel(run_id=run.pk, reason="wrong learning rate") is True
    run.refresh_from_db()
    assert run.status == TrainingRun.CANCELLED and run.status_reason == "wrong learning rate"
    assert cluster.job(name) is None
    assert cluster.pods() == [other_pod]  # its pod went; the other run's pod stays
    assert cluster.job(f"crucible-run-{other.pk}-1") is not None
    (delete,) = cluster.requests("DELETE", f"/jobs/{name}")
    assert (
        delete.params["propagationPolicy"] == "Background"
    )  # the garbage collector takes its pods too

    assert run_cancel(run_id=run.pk, reason="again") is False  # safe twice
    out = StringIO()
    call_command("cancel_run", str(run.pk), stdout=out)
    assert "already cancelled" in out.getvalue()
    run.refresh_from_db()
    assert run.status_reason == "wrong learning rate"
    assert runs_reconcile() == {other.pk: "active"}  # the cancelled run is left alone


@pytest.mark.django_db
def test_cancel_command_refuses_a_finished_run(cluster):
    run = make_run(**k8s_config())
    run_launch(run.pk)
    trainer_starts(run)
    run_transition(run_id=run.pk, to_status=TrainingRun.SUCCEEDED, reason="trained 3 steps")
    with pytest.raises(InvalidTransition, match="already ended succeeded"):
        run_cancel(run_id=run.pk, reason="too late")
    with pytest.raises(CommandError, match="already ended succeeded"):
        call_command("cancel_run", str(run.pk))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("cancel_run", "999999")


@pytest.mark.parametrize(
    "spec, key",
    [
        ({}, "kubernetes.image"),
        ({"image": IMAGE, "cpu": "lots"}, "kubernetes.cpu"),
        ({"image": IMAGE, "cpu": "-1"}, "kubernetes.cpu"),
        ({"image": IMAGE, "memory": "8 GB"}, "kubernetes.memory"),
        ({"image": IMAGE, "memory": "8"}, "kubernetes.memory"),  # 8 bytes
        ({"image": IMAGE, "gpus": -1}, "kubernetes.gpus"),
        ({"image": IMAGE, "gpus": "2"}, "kubernetes.gpus"),
        ({"image": IMAGE, "backoff_limit": -1}, "kubernetes.backoff_limit"),
        (
            {"image": IMAGE, "ttl_seconds_after_finished": 1.5},
            "kubernetes.ttl_seconds_after_finished",
        ),
        ({"image": IMAGE, "namespace": "Team_RL"}, "kubernetes.namespace"),
        ({"image": IMAGE, "node_selector": ["gpu"]}, "kubernetes.node_selector"),
        ({"image": IMAGE, "node_selector": {"pool": 3}}, "kubernetes.node_selector.pool"),
        (
            {"image": IMAGE, "tolerations": [{"key": "gpu", "operator": "Maybe"}]},
            r"kubernetes.tolerations\[0\].operator",
        ),
        (
            {"image": IMAGE, "tolerations": [{"key": "gpu", "tolerationSeconds": 30}]},
            r"kubernetes.tolerations\[0\].tolerationSeconds",
        ),
        (
            {"image": IMAGE, "tolerations": [{"key": "gpu", "colour": "red"}]},
            r"kubernetes.tolerations\[0\]",
        ),
        ({"image": IMAGE, "env_secret": "My Secret"}, "kubernetes.env_secret"),
        ({"image": IMAGE, "gpu": 1}, "kubernetes.gpu"),
        ({"image": "has space"}, "kubernetes.image"),
    ],
)
def test_bad_specs_are_refused_naming_the_key(spec, key):
    with pytest.raises(ConfigError, match=key):
        k8s.KubernetesSpec.from_config(spec)


def test_spec_defaults():
    spec = k8s.KubernetesSpec.from_config({"image": IMAGE})
    assert (
        spec.namespace,
        spec.cpu,
        spec.memory,
        spec.gpus,
        spec.backoff_limit,
        spec.ttl_seconds_after_finished,
        spec.active_deadline_seconds,
    ) == ("crucible", "2", "8Gi", 0, 0, 3600, None)


@pytest.mark.django_db
def test_train_command_refuses_a_bad_spec_before_creating_a_run(cluster):
    make_run(backend="local")  # a task set "k8s-N" exists
    task_set = TrainingRun.objects.get().task_set.name
    before = TrainingRun.objects.count()
    for overrides, key in (
        (["--set", f'kubernetes={{"image": "{IMAGE}", "gpus": -1}}'], "kubernetes.gpus"),
        ([], "kubernetes.image"),
    ):
        with pytest.raises(CommandError, match=key):
            call_command(
                "train",
                "--taskset",
                task_set,
                "--steps",
                "2",
                "--backend",
                "kubernetes",
                *overrides,
                stdout=StringIO(),
            )
    with pytest.raises(CommandError, match="invalid choice"):
        call_command(
            "train", "--taskset", task_set, "--steps", "2", "--backend", "slurm", stdout=StringIO()
        )
    assert TrainingRun.objects.count() == before
