"""The Kubernetes launch backend: one batch/v1 Job per attempt of a run, through the official
client.

A run's config holds the launch spec under ``kubernetes`` (:class:`KubernetesSpec`). Attempt
``n`` of run ``ID`` is the Job ``crucible-run-ID-n`` whose single pod runs
``python manage.py run_trainer ID`` (under ``torch.distributed.run`` when the config asks for
several ranks); the run's ``backend_ref`` names it as ``job:NAMESPACE/NAME``. The trainer
records running/succeeded/failed itself; :mod:`training.reconcile` watches the Job with
:func:`job_status` and decides about resuming, which is why ``backoffLimit`` defaults to 0:
Kubernetes does not retry a pod that lost its work, the reconcile loop relaunches from the
last checkpoint instead.

Cluster defaults: ``CRUCIBLE_KUBERNETES_DEFAULTS`` (a JSON object, :func:`spec_defaults`) holds
the spec keys every run starts from (image, GPUs, node selector...); the deployment sets it
from one ConfigMap (deploy/kubernetes/base/trainer-spec.json), and a run's own ``kubernetes``
keys override it key by key. Every trainer pod meets the restricted Pod Security Standard
(non-root, no capabilities, no privilege escalation, RuntimeDefault seccomp), so the image
must run as a numeric non-root user (deploy/docker/trainer.Dockerfile does).

Client configuration: :func:`api_client` loads the in-cluster service account, else the
kubeconfig (``KUBECONFIG`` or ``~/.kube/config``); :func:`api_client_set` replaces it (tests
point it at the kmock emulator). Every manifest validates against the official schemas of
:data:`TARGET_KUBERNETES_VERSION` (tests/training/test_kubernetes_manifests_valid.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import NamedTuple

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils.quantity import parse_quantity

from training.errors import ConfigError
from training.models import TrainingRun

log = logging.getLogger(__name__)

TARGET_KUBERNETES_VERSION = "1.30"
"""The Kubernetes version whose schemas every manifest is checked against (1.30 and later)."""

DEFAULTS_ENV = "CRUCIBLE_KUBERNETES_DEFAULTS"
"""Environment variable holding the cluster's default launch spec (JSON object), see
:func:`spec_defaults`."""

RUN_LABEL = "crucible.dev/run-id"
ATTEMPT_LABEL = "crucible.dev/attempt"
COMMON_LABELS = {
    "app.kubernetes.io/name": "crucible-trainer",
    "app.kubernetes.io/managed-by": "crucible",
}
CONTAINER_NAME = "trainer"
VAR_MOUNT_PATH = "/var/lib/crucible"
REQUEST_TIMEOUT = (5, 30)  # seconds: connect, read
MIN_MEMORY_BYTES = 256 * 2**20  # Python, Django and torch alone take about this much
# Pod waits that do not clear by themselves: the attempt counts as failed.
STUCK_WAIT_REASONS = (
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_QUANTITY = re.compile(
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


class KubernetesUnavailable(RuntimeError):
    """No Kubernetes configuration: neither in a cluster nor a kubeconfig."""


class JobStatus(NamedTuple):
    """What the cluster says about a run's current Job.

    ``state`` is ``active``, ``succeeded``, ``failed`` or ``missing``; ``reason`` says why in
    words, with the Job condition and the pods' termination reasons (``OOMKilled``,
    ``Evicted``, ``DeadlineExceeded``, ``BackoffLimitExceeded``...) when it failed.
    """

    state: str
    reason: str = ""


# --- the launch spec --------------------------------------------------------------


def _key(name: str) -> str:
    return f"config key 'kubernetes.{name}'"


def _check_name(name: str, value, pattern: re.Pattern, limit: int, what: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{_key(name)} must be str, got {value!r}")
    if len(value) > limit or not pattern.match(value):
        raise ConfigError(
            f"{_key(name)} must be {what} (at most {limit} characters), got {value!r}"
        )
    return value


def _check_quantity(name: str, value, *, minimum: Decimal, shown: str, example: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(
            f"{_key(name)} must be a Kubernetes quantity such as {example!r}, got {value!r}"
        )
    text = str(value)
    try:
        amount = parse_quantity(text)
    except ValueError:
        amount = None
    if amount is None or not _QUANTITY.match(text):
        raise ConfigError(
            f"{_key(name)} must be a Kubernetes quantity such as {example!r}, got {value!r}"
        )
    if amount < minimum:
        raise ConfigError(f"{_key(name)} must be at least {shown}, got {value!r}")
    return text


def _check_int(name: str, value, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{_key(name)} must be int, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{_key(name)} must be at least {minimum}, got {value}")
    return value


def _check_tolerations(value) -> list[dict]:
    if not isinstance(value, list):
        raise ConfigError(
            f"{_key('tolerations')} must be a list of Kubernetes tolerations, got {value!r}"
        )
    out = []
    for i, item in enumerate(value):
        where = f"tolerations[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(
                f"{_key(where)} must be a dict like {{'key': 'nvidia.com/gpu', 'operator': "
                f"'Exists', 'effect': 'NoSchedule'}}, got {item!r}"
            )
        unknown = sorted(set(item) - set(_TOLERATION_KEYS))
        if unknown:
            raise ConfigError(
                f"{_key(where)}: unknown field(s) {', '.join(unknown)}; "
                f"known: {', '.join(_TOLERATION_KEYS)}"
            )
        for text_key in ("key", "operator", "value", "effect"):
            if text_key in item and not isinstance(item[text_key], str):
                raise ConfigError(
                    f"{_key(where + '.' + text_key)} must be str, got {item[text_key]!r}"
                )
        operator = item.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise ConfigError(
                f"{_key(where + '.operator')} must be Equal or Exists, got {operator!r}"
            )
        if operator == "Exists" and item.get("value"):
            raise ConfigError(f"{_key(where + '.value')} must be empty when the operator is Exists")
        if not item.get("key") and operator != "Exists":
            raise ConfigError(f"{_key(where + '.key')} is required unless the operator is Exists")
        if item.get("effect", "") not in _EFFECTS:
            raise ConfigError(
                f"{_key(where + '.effect')} must be one of NoSchedule, PreferNoSchedule, NoExecute "
                f"(or empty for all), got {item['effect']!r}"
            )
        if "tolerationSeconds" in item:
            _check_int(where + ".tolerationSeconds", item["tolerationSeconds"], minimum=0)
            if item.get("effect") != "NoExecute":
                raise ConfigError(
                    f"{_key(where + '.tolerationSeconds')} applies only to the NoExecute effect"
                )
        out.append(dict(item))
    return out


@dataclass(frozen=True)
class KubernetesSpec:
    """Where and how a run's trainer pod runs.

    Units: ``cpu`` in cores and ``memory`` in bytes, both as Kubernetes quantities
    (``"500m"``, ``"2"``, ``"8Gi"``); ``gpus`` in whole ``nvidia.com/gpu`` devices; the
    ``*_seconds`` fields in seconds. ``env_secret`` names a Secret whose keys become the
    pod's environment (``DATABASE_URL``, ``REDIS_URL``...), ``env_config_map`` a ConfigMap
    whose keys do too (the deployment's ``crucible-config``). ``fs_group`` is the group id the
    pod's volumes are made writable to (the image's group, 10001 in deploy/docker), for a
    ``volume_claim`` the trainer must write to. ``volume_claim`` names a
    PersistentVolumeClaim mounted at :data:`VAR_MOUNT_PATH` as ``CRUCIBLE_VAR_DIR``, so a
    relaunched attempt finds the checkpoints of the one before; without it a resume starts
    from scratch unless the image points ``CRUCIBLE_VAR_DIR`` at shared storage itself.
    """

    image: str
    namespace: str = "crucible"
    cpu: str = "2"
    memory: str = "8Gi"
    gpus: int = 0
    node_selector: dict = field(default_factory=dict)
    tolerations: list = field(default_factory=list)
    env_secret: str = ""
    env_config_map: str = ""
    fs_group: int | None = None
    service_account: str = ""
    volume_claim: str = ""
    backoff_limit: int = 0
    ttl_seconds_after_finished: int = 3600
    active_deadline_seconds: int | None = None

    @classmethod
    def from_config(cls, data: dict) -> KubernetesSpec:
        """Build and check the spec from a run config's ``kubernetes`` dict.

        The cluster's defaults (:func:`spec_defaults`) come first; ``data`` overrides them
        key by key.

        Raises:
            ConfigError: naming the key (``kubernetes.cpu``...): not a dict, an unknown key,
                a missing ``image``, a value of the wrong type, or an impossible value (a
                quantity Kubernetes cannot parse, ``gpus`` or ``backoff_limit`` below 0, a
                name Kubernetes would refuse, a malformed toleration); for a key that came
                from the defaults, the message also names :data:`DEFAULTS_ENV`.
        """
        if not isinstance(data, dict):
            raise ConfigError(
                "config key 'kubernetes' must be a dict such as {'image': "
                f"'registry/crucible:1'}}, got {data!r}"
            )
        defaults = spec_defaults()
        try:
            return cls._from_dict({**defaults, **data})
        except ConfigError as exc:
            from_defaults = [k for k in defaults if k not in data and f"kubernetes.{k}" in str(exc)]
            if from_defaults:
                raise ConfigError(
                    f"{exc} (the value of {', '.join(from_defaults)} comes from {DEFAULTS_ENV}, "
                    f"the cluster's defaults)"
                ) from None
            raise

    @classmethod
    def _from_dict(cls, data: dict) -> KubernetesSpec:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown config key(s) {', '.join('kubernetes.' + k for k in unknown)}; "
                f"known keys: {', '.join(known)}"
            )
        image = data.get("image")
        if image is None or image == "":
            raise ConfigError(
                f"{_key('image')} is required with the kubernetes backend: the trainer's container "
                f"image, e.g. registry.example.com/crucible:1.0"
            )
        if not isinstance(image, str) or any(c.isspace() for c in image):
            raise ConfigError(
                f"{_key('image')} must be an image reference without spaces, got {image!r}"
            )
        values: dict = {"image": image}
        if "namespace" in data:
            values["namespace"] = _check_name(
                "namespace", data["namespace"], _DNS_LABEL, 63, "a DNS-1123 label"
            )
        if "cpu" in data:
            values["cpu"] = _check_quantity(
                "cpu",
                data["cpu"],
                minimum=Decimal("0.001"),
                shown="1m (a thousandth of a core)",
                example="2",
            )
        if "memory" in data:
            values["memory"] = _check_quantity(
                "memory",
                data["memory"],
                minimum=Decimal(MIN_MEMORY_BYTES),
                shown="256Mi (the trainer does not start in less)",
                example="8Gi",
            )
        if "gpus" in data:
            values["gpus"] = _check_int("gpus", data["gpus"], minimum=0)
        for name, minimum in (("backoff_limit", 0), ("ttl_seconds_after_finished", 0)):
            if name in data:
                values[name] = _check_int(name, data[name], minimum=minimum)
        if data.get("fs_group") is not None:
            values["fs_group"] = _check_int("fs_group", data["fs_group"], minimum=1)
        if data.get("active_deadline_seconds") is not None:
            values["active_deadline_seconds"] = _check_int(
                "active_deadline_seconds", data["active_deadline_seconds"], minimum=1
            )
        for name in ("env_secret", "env_config_map", "service_account", "volume_claim"):
            if data.get(name):
                values[name] = _check_name(
                    name, data[name], _DNS_SUBDOMAIN, 253, "a DNS-1123 subdomain name"
                )
            elif name in data and data[name] not in ("", None):
                raise ConfigError(f"{_key(name)} must be str, got {data[name]!r}")
        if "node_selector" in data:
            selector = data["node_selector"]
            if not isinstance(selector, dict):
                raise ConfigError(
                    f"{_key('node_selector')} must be a dict of label to value, got {selector!r}"
                )
            for label, value in selector.items():
                _check_label_key(f"node_selector.{label}", label)
                if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                    raise ConfigError(
                        f"{_key('node_selector.' + str(label))} must be a label value (str, at "
                        f"most 63 characters of letters, digits, '-', '_', '.'), got {value!r}"
                    )
            values["node_selector"] = dict(selector)
        if "tolerations" in data:
            values["tolerations"] = _check_tolerations(data["tolerations"])
        return cls(**values)


def spec_defaults() -> dict:
    """The cluster's default launch spec: the JSON object in ``CRUCIBLE_KUBERNETES_DEFAULTS``.

    The Kubernetes deployment sets it from the ``crucible-trainer-spec`` ConfigMap
    (deploy/kubernetes), so the trainer image, GPUs, node selector and tolerations are
    configured in one place; ``{}`` when unset or blank (every key then comes from the run).

    Raises:
        ConfigError: naming the variable: the value is not JSON, or not a JSON object.
    """
    raw = os.environ.get(DEFAULTS_ENV, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(
            f"{DEFAULTS_ENV} is not JSON ({exc}); it must be an object such as "
            f'{{"image": "registry.example.com/crucible-trainer:1.0", "gpus": 1}}'
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{DEFAULTS_ENV} must be a JSON object of launch spec keys, got {value!r}"
        )
    return value


def _check_label_key(where: str, label) -> None:
    if not isinstance(label, str):
        raise ConfigError(f"{_key(where)}: a label key must be str, got {label!r}")
    prefix, slash, name = label.rpartition("/")
    ok = (
        len(name) <= 63
        and _LABEL_NAME.match(name)
        and (not slash or (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)))
    )
    if not ok:
        raise ConfigError(
            f"{_key(where)}: {label!r} is not a label key (optional DNS prefix/, then a name)"
        )


# --- manifests ----------------------------------------------------------------------


def job_name(run_id: int, attempt: int) -> str:
    """The Job of attempt ``attempt`` (1 for the first launch) of run ``run_id``."""
    return f"crucible-run-{run_id}-{attempt}"


def trainer_command(run_id: int, nproc_per_node: int = 1) -> list[str]:
    """The trainer's command line relative to the project root (``manage.py`` there)."""
    if nproc_per_node > 1:
        # --standalone: one node, a free rendezvous port (two runs on a host must not share 29500).
        return [
            "python",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc_per_node),
            "manage.py",
            "run_trainer",
            str(run_id),
        ]
    return ["python", "manage.py", "run_trainer", str(run_id)]


def job_manifest(run, spec: KubernetesSpec, *, attempt: int) -> dict:
    """The batch/v1 Job (a plain dict) of attempt ``attempt`` of ``run``.

    One pod, ``restartPolicy: Never``, labelled with the run id and attempt; requests and
    limits from ``spec`` (CPU and memory requested and limited alike, so the pod is in the
    Guaranteed QoS class and last to be evicted; GPUs as ``nvidia.com/gpu``). The pod meets
    the restricted Pod Security Standard, mounts no API token unless ``spec`` names a
    service account, and has a memory-backed ``/dev/shm`` (a container's default 64 MiB
    is too small for NCCL and DataLoader workers; it counts against the memory limit).
    """
    name = job_name(run.pk, attempt)
    labels = {**COMMON_LABELS, RUN_LABEL: str(run.pk), ATTEMPT_LABEL: str(attempt)}
    resources = {"cpu": spec.cpu, "memory": spec.memory}
    if spec.gpus:
        resources["nvidia.com/gpu"] = str(spec.gpus)
    nproc = (run.config or {}).get("nproc_per_node", 1)
    container: dict = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "command": trainer_command(run.pk, nproc if isinstance(nproc, int) and nproc > 0 else 1),
        "env": [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "CRUCIBLE_RUN_ATTEMPT", "value": str(attempt)},
        ],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod_security: dict = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if spec.fs_group is not None:
        pod_security["fsGroup"] = spec.fs_group
    pod: dict = {
        "restartPolicy": "Never",
        "securityContext": pod_security,
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    env_from = []
    if spec.env_config_map:
        env_from.append({"configMapRef": {"name": spec.env_config_map}})
    if spec.env_secret:
        env_from.append({"secretRef": {"name": spec.env_secret}})
    if env_from:
        container["envFrom"] = env_from
    if spec.volume_claim:
        container["env"].append({"name": "CRUCIBLE_VAR_DIR", "value": VAR_MOUNT_PATH})
        container["volumeMounts"].append({"name": "crucible-var", "mountPath": VAR_MOUNT_PATH})
        pod["volumes"].append(
            {"name": "crucible-var", "persistentVolumeClaim": {"claimName": spec.volume_claim}}
        )
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    else:
        pod["automountServiceAccountToken"] = False  # the trainer never calls the API
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod["tolerations"] = [dict(t) for t in spec.tolerations]
    job_spec: dict = {
        "backoffLimit": spec.backoff_limit,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
    }
    if spec.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": job_spec,
    }


# --- the client -------------------------------------------------------------------

_client: client.ApiClient | None = None
_client_lock = threading.Lock()


def api_client_set(api_client: client.ApiClient | None) -> None:
    """Use ``api_client`` for every call of this module; ``None`` goes back to loading the
    config."""
    global _client
    with _client_lock:
        _client = api_client


def api_client() -> client.ApiClient:
    """The client every call uses: in-cluster config, else the kubeconfig (loaded once).

    Raises:
        KubernetesUnavailable: neither a service account nor a kubeconfig is there.
    """
    global _client
    with _client_lock:
        if _client is None:
            configuration = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException as in_cluster:
                try:
                    config.load_kube_config(client_configuration=configuration)
                except (config.ConfigException, OSError) as kubeconfig:
                    raise KubernetesUnavailable(
                        f"no Kubernetes configuration: not inside a cluster ({in_cluster}) and no "
                        f"usable kubeconfig ({kubeconfig}); set KUBECONFIG"
                    ) from kubeconfig
            _client = client.ApiClient(configuration)
        return _client


def _batch() -> client.BatchV1Api:
    return client.BatchV1Api(api_client())


def _core() -> client.CoreV1Api:
    return client.CoreV1Api(api_client())


def parse_ref(backend_ref: str) -> tuple[str, str] | None:
    """``"job:NAMESPACE/NAME"`` -> ``(NAMESPACE, NAME)``; None for anything else."""
    kind, _, rest = (backend_ref or "").partition(":")
    namespace, slash, name = rest.partition("/")
    if kind != "job" or not slash or not namespace or not name:
        return None
    return namespace, name


def _spec_namespace(run) -> str:
    raw = (run.config or {}).get("kubernetes") or {}
    try:
        defaults = spec_defaults()
    except ConfigError:
        defaults = {}
    namespace = (
        raw.get("namespace")
        if isinstance(raw, dict) and raw.get("namespace")
        else defaults.get("namespace")
    )
    return namespace if isinstance(namespace, str) and namespace else KubernetesSpec.namespace


def _labelled(items, **labels: str) -> list:
    """``items`` whose labels hold ``labels`` (checked here too: a selector a server ignored selects
    nothing)."""
    return [
        i for i in items if all((i.metadata.labels or {}).get(k) == v for k, v in labels.items())
    ]


def _api_error(exc: ApiException) -> str:
    return f"Kubernetes API said {exc.status} {exc.reason}: {(exc.body or '').strip()[:500]}"


# --- launch, status, delete -------------------------------------------------------------


class JobNotCreated(Exception):
    """The trainer Job of an attempt could not be created. ``to_status`` is what the run becomes:
    ``failed`` where the cluster will refuse it again (a 4xx, no configuration), ``interrupted``
    where the error is transient (a 5xx, no connection: the reconcile loop retries within
    ``max_resumes``); ``reason`` says which Job and why."""

    def __init__(self, to_status: str, reason: str):
        super().__init__(reason)
        self.to_status = to_status
        self.reason = reason


def job_create(run, spec: KubernetesSpec, *, attempt: int) -> str:
    """Create the Job of the run's attempt ``attempt`` and return its ``backend_ref``
    (``job:NAMESPACE/NAME``). A Job that already exists (an earlier delivery created it) is
    adopted. The run is not touched: :func:`training.backends.kubernetes_launch` claims it and
    records the answer.

    Raises:
        JobNotCreated: the API refused the Job or could not be reached.
    """
    manifest = job_manifest(run, spec, attempt=attempt)
    name = manifest["metadata"]["name"]
    try:
        _batch().create_namespaced_job(spec.namespace, manifest, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 409:
            log.info("run %s: Job %s/%s already exists; adopting it", run.pk, spec.namespace, name)
        elif exc.status and 400 <= exc.status < 500:
            raise JobNotCreated(
                TrainingRun.FAILED,
                f"could not create Job {spec.namespace}/{name}: {_api_error(exc)}",
            ) from exc
        else:
            raise JobNotCreated(
                TrainingRun.INTERRUPTED,
                f"could not create Job {spec.namespace}/{name}: {_api_error(exc)}",
            ) from exc
    except KubernetesUnavailable as exc:
        raise JobNotCreated(TrainingRun.FAILED, str(exc)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise JobNotCreated(
            TrainingRun.INTERRUPTED,
            f"could not reach the Kubernetes API to create Job {spec.namespace}/{name}: {exc}",
        ) from exc
    return f"job:{spec.namespace}/{name}"


def _pod_reasons(pods) -> list[str]:
    """Why the pods of a Job ended or cannot start, in words (``OOMKilled``, ``Evicted``...)."""
    reasons = []
    for pod in pods:
        status = pod.status
        if status is None:
            continue
        parts = []
        if status.reason:
            parts.append(f"{status.reason}" + (f" ({status.message})" if status.message else ""))
        for cs in status.container_statuses or []:
            state = cs.state
            terminated = (state.terminated if state else None) or (
                cs.last_state.terminated if cs.last_state else None
            )
            waiting = state.waiting if state else None
            if terminated is not None and (
                terminated.exit_code or terminated.reason not in (None, "Completed")
            ):
                parts.append(
                    f"container {cs.name} terminated: {terminated.reason or 'Error'} "
                    f"(exit code {terminated.exit_code})"
                    + (f": {terminated.message.strip()[:300]}" if terminated.message else "")
                )
            elif waiting is not None and waiting.reason in STUCK_WAIT_REASONS:
                parts.append(
                    f"container {cs.name} cannot start: {waiting.reason}"
                    + (f": {waiting.message.strip()[:300]}" if waiting.message else "")
                )
        if parts:
            reasons.append(f"pod {pod.metadata.name}: " + "; ".join(parts))
    return reasons


def _attempt_pods(namespace: str, name: str) -> list:
    pods = (
        _core()
        .list_namespaced_pod(
            namespace, label_selector=f"job-name={name}", _request_timeout=REQUEST_TIMEOUT
        )
        .items
    )
    return [
        p
        for p in pods
        if (p.metadata.labels or {}).get("job-name") == name
        or (p.metadata.labels or {}).get("batch.kubernetes.io/job-name") == name
    ]


def job_status(run) -> JobStatus:
    """What the cluster says about the Job in ``run.backend_ref``.

    ``missing`` when no Job is recorded, it is gone (deleted, or removed by its
    ``ttlSecondsAfterFinished``) or being deleted; ``succeeded``/``failed`` from its
    conditions (``Complete``/``SuccessCriteriaMet``, ``Failed``/``FailureTarget``), or from
    a pod stuck on a wait that does not clear by itself (``ImagePullBackOff``...);
    ``active`` otherwise. A failure's reason names the condition and the pods' ends.

    Raises:
        kubernetes.client.ApiException: the API refused the read (other than 404).
        urllib3.exceptions.HTTPError: the API could not be reached.
        KubernetesUnavailable: no configuration. An unreachable cluster is never read as a
            vanished Job: the caller leaves the run as it is.
    """
    ref = parse_ref(run.backend_ref)
    if ref is None:
        return JobStatus(
            "missing", f"run {run.pk} records no Job (backend_ref {run.backend_ref!r})"
        )
    namespace, name = ref
    try:
        job = _batch().read_namespaced_job(name, namespace, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return JobStatus(
                "missing", f"Job {namespace}/{name} is gone (deleted, or removed after it finished)"
            )
        raise
    if job.metadata.deletion_timestamp:
        return JobStatus("missing", f"Job {namespace}/{name} is being deleted")
    status = job.status
    conditions = {
        c.type: c for c in (status.conditions if status else None) or [] if c.status == "True"
    }
    for kind in ("Complete", "SuccessCriteriaMet"):
        if kind in conditions:
            return JobStatus("succeeded", f"Job {namespace}/{name} completed")
    failed = next((conditions[k] for k in ("Failed", "FailureTarget") if k in conditions), None)
    backoff = job.spec.backoff_limit if job.spec and job.spec.backoff_limit is not None else 6
    if failed is None and status is not None and (status.failed or 0) > backoff:
        failed = client.V1JobCondition(
            type="Failed",
            status="True",
            reason="BackoffLimitExceeded",
            message=f"{status.failed} pod(s) failed",
        )
    pods = _attempt_pods(namespace, name)
    details = _pod_reasons(pods)
    if failed is not None:
        words = f"Job {namespace}/{name} failed: {failed.reason or 'Failed'}"
        if failed.message:
            words += f" ({failed.message})"
        return JobStatus("failed", "; ".join([words, *details]))
    stuck = [d for d in details if "cannot start" in d]
    if stuck:
        return JobStatus(
            "failed", f"Job {namespace}/{name} cannot start its pod: " + "; ".join(stuck)
        )
    return JobStatus("active", f"Job {namespace}/{name} is active")


def job_delete(run, *, also: list[tuple[str, str]] = ()) -> list[str]:
    """Delete every Job of ``run`` (all attempts) and their pods; return the Jobs deleted.

    Jobs are found from ``run.backend_ref``, ``also`` and the run-id label in the spec's
    namespace; each is deleted with ``propagationPolicy: Background`` and then every pod
    still labelled with the run id is deleted too (a cluster without a garbage collector
    keeps them otherwise). Idempotent: what is already gone is skipped.

    Raises:
        kubernetes.client.ApiException: the API refused a call (other than 404).
        urllib3.exceptions.HTTPError: the API could not be reached.
        KubernetesUnavailable: no configuration.
    """
    ref = parse_ref(run.backend_ref)
    namespaces = {_spec_namespace(run)} | ({ref[0]} if ref else set()) | {ns for ns, _ in also}
    targets = set(also) | ({ref} if ref else set())
    selector = f"{RUN_LABEL}={run.pk}"
    batch, core = _batch(), _core()
    for namespace in namespaces:
        jobs = batch.list_namespaced_job(
            namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
        ).items
        targets |= {
            (namespace, j.metadata.name) for j in _labelled(jobs, **{RUN_LABEL: str(run.pk)})
        }
    deleted = []
    for namespace, name in sorted(targets):
        try:
            batch.delete_namespaced_job(
                name, namespace, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT
            )
            deleted.append(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
    for namespace in namespaces:
        pods = core.list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
        ).items
        for pod in _labelled(pods, **{RUN_LABEL: str(run.pk)}):
            try:
                core.delete_namespaced_pod(
                    pod.metadata.name, namespace, _request_timeout=REQUEST_TIMEOUT
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
    return deleted
