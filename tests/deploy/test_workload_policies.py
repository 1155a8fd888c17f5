"""What every workload of the overlays must carry: requests and limits, probes, a non-root
numeric user; the sandboxes' full lock-down; one beat; pinned images in prod; commands that
Crucible's own parsers accept; and only Secrets and ConfigMaps that exist or that the guide
tells the operator to create."""

import re

import pytest
from celery import Celery
from celery.bin.base import CLIContext
from celery.bin.celery import celery as celery_cli
from django.core.management import get_commands, load_command_class
from django.http.request import validate_host
from kubernetes.utils.quantity import parse_quantity

import console.celery
from core import queues
from sandboxes.runtimes import EXECUTORS
from tests.deploy.manifests import (
    NO_RENDERER,
    RENDERER,
    ROOT,
    VARIANTS,
    containers,
    find,
    pod_templates,
    render,
    trainer_spec,
)

pytestmark = pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)

SANDBOXES = ("crucible-sandbox-python", "crucible-sandbox-node")
CRUCIBLE_IMAGES = ("web", "worker", "sandbox-python", "sandbox-node")
# Created by the operator in prod (deploy/README.md, "What to set"), by the dev overlay's generators
# in dev.
EXTERNAL_SECRETS = {"crucible-env", "crucible-sandbox-redis", "crucible-tls", "crucible-keda-redis"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_has_requests_and_limits(variant):
    for name, _workload, pod in pod_templates(render(variant)):
        for container in containers(pod):
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(kind) or {}), (
                    name,
                    container["name"],
                    kind,
                )
            for key in ("cpu", "memory"):
                assert parse_quantity(resources["requests"][key]) <= parse_quantity(
                    resources["limits"][key]
                ), (name, container["name"], key)


@pytest.mark.parametrize("variant", VARIANTS)
def test_long_running_containers_have_probes(variant):
    for name, workload, pod in pod_templates(render(variant)):
        if workload["kind"] == "Job":
            continue
        for container in pod["containers"]:
            assert "livenessProbe" in container, (name, container["name"])
            # beat serves nothing: nobody routes to it, so it has no readiness to report
            if workload["metadata"]["name"] != "crucible-beat":
                assert "readinessProbe" in container, (name, container["name"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_pod_runs_as_a_numeric_non_root_user(variant):
    for name, _workload, pod in pod_templates(render(variant)):
        context = pod.get("securityContext") or {}
        assert context.get("runAsNonRoot") is True, name
        assert isinstance(context.get("runAsUser"), int) and context["runAsUser"] > 0, name
        for container in containers(pod):
            assert (container.get("securityContext") or {}).get("runAsUser", 1) != 0, (
                name,
                container["name"],
            )


@pytest.mark.parametrize("variant", VARIANTS)
def test_sandbox_pods_are_locked_down(variant):
    docs = render(variant)
    for deployment in SANDBOXES:
        workload = find(docs, "Deployment", deployment)
        pod = workload["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        account = find(docs, "ServiceAccount", pod["serviceAccountName"])
        assert account["automountServiceAccountToken"] is False
        assert (
            find(docs, "ServiceAccount", "crucible-control")["metadata"]["name"]
            != pod["serviceAccountName"]
        )
        assert (
            pod["securityContext"]["runAsNonRoot"] is True
            and pod["securityContext"]["runAsUser"] == 10001
        )
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context.get("privileged", False) is False
        if "dev" in variant:  # components/sandbox-nested-namespaces: what it relaxes, and only that
            assert pod["hostUsers"] is False and context["procMount"] == "Unmasked"
            assert context["seccompProfile"] == {"type": "Unconfined"}
        else:
            assert (
                "seccompProfile" not in context
                and "procMount" not in context
                and "hostUsers" not in pod
            )
            assert pod["runtimeClassName"] == "gvisor"
        # every writable path is an emptyDir; no other volume kind, no secret but the Redis URL
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert {path for path, vol in mounts.items() if "emptyDir" in volumes[vol]} == {
            "/tmp",
            "/var/lib/crucible",
        }
        secrets = [v["secret"] for v in volumes.values() if "secret" in v]
        assert secrets == [
            {
                "secretName": secrets[0]["secretName"],
                "defaultMode": 0o440,
                "items": [{"key": "REDIS_URL", "path": "REDIS_URL"}],
            }
        ]
        env = {e["name"] for e in container.get("env", [])}
        assert not container.get("envFrom") and not env & {
            "DATABASE_URL",
            "DATABASE_URL_FILE",
            "CRUCIBLE_SECRET_KEY",
            "CRUCIBLE_SECRET_KEY_FILE",
            "CRUCIBLE_KUBERNETES_DEFAULTS",
        }
        # one slot per CPU of the limit: more slots than cores only queue inside the pod
        concurrency = int(container["command"][container["command"].index("--concurrency") + 1])
        assert concurrency <= parse_quantity(container["resources"]["limits"]["cpu"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_exactly_one_beat(variant):
    docs = render(variant)
    beats = [
        d
        for d in docs
        if d["kind"] == "Deployment"
        and "beat" in d["spec"]["template"]["spec"]["containers"][0]["command"]
    ]
    assert [b["metadata"]["name"] for b in beats] == ["crucible-beat"]
    (beat,) = beats
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    assert not [
        d
        for d in docs
        if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")
        and d["spec"]["scaleTargetRef"]["name"] == "crucible-beat"
    ]


def _image_tag(image: str) -> str | None:
    if "@sha256:" in image:
        return image.split("@", 1)[1]
    name, _, tag = image.rpartition(":")
    return tag if name and "/" not in tag else None


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.startswith("prod")])
def test_prod_images_are_pinned_to_one_release(variant):
    docs = render(variant)
    images = {c["image"] for _n, _w, pod in pod_templates(docs) for c in containers(pod)}
    images.add(trainer_spec(docs)["image"])
    tags = {}
    for image in images:
        tag = _image_tag(image)
        assert tag and tag != "latest", f"{image} is not pinned by tag or digest"
        tags[image.rpartition(":")[0].rsplit("/", 1)[-1]] = tag
    # web, worker, sandboxes and the trainer of one deployment come from one release
    assert {tags[name] for name in (*CRUCIBLE_IMAGES, "trainer")} == {tags["web"]}


def _manage_commands(docs) -> list[tuple[str, list[str]]]:
    found = []
    for name, _workload, pod in pod_templates(docs):
        for container in containers(pod):
            command = container.get("command") or []
            if command[:2] == ["python", "manage.py"]:
                found.append((f"{name}/{container['name']}", command[2:]))
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_manage_commands_parse_with_their_own_parsers(variant):
    docs = render(variant)
    commands = _manage_commands(docs)
    assert {args[0] for _where, args in commands} == {"migrate", "sandbox_worker", "serve"}
    available = get_commands()
    for where, (name, *args) in commands:
        assert name in available, f"{where}: no management command {name!r}"
        command = load_command_class(available[name], name)
        options = command.create_parser("manage.py", name).parse_args(
            args
        )  # SystemExit on a bad argument
        if name == "sandbox_worker":
            assert (
                options.runtime in EXECUTORS
                and where.split("/")[1] == f"crucible-sandbox-{options.runtime}"
            )


@pytest.mark.parametrize("variant", VARIANTS)
def test_celery_commands_name_the_app_and_real_queues(variant):
    assert isinstance(console.celery.app, Celery)
    consumed = []
    for name, _workload, pod in pod_templates(render(variant)):
        for container in pod["containers"]:
            command = container.get("command") or []
            if command[:1] != ["celery"]:
                continue
            assert command[1:3] == ["-A", "console"], name
            sub = command[3]
            assert sub in ("worker", "beat"), name
            # click parses the subcommand's options as `celery ... worker` would, without running it
            obj = CLIContext(app=console.celery.app, no_color=True, workdir=None, quiet=True)
            celery_cli.commands[sub].make_context(sub, list(command[4:]), obj=obj)
            if sub == "worker":
                consumed += command[command.index("-Q") + 1].split(",")
    # every queue but `trainer` (local-backend runs; no Kubernetes worker:
    # deploy/kubernetes/base/workers.yaml)
    assert sorted(consumed) == sorted(q for q in queues.ALL if q != queues.TRAINER)


@pytest.mark.parametrize("variant", VARIANTS)
def test_referenced_secrets_and_config_maps_exist(variant):
    docs = render(variant)
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    config_maps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    wanted_secrets, wanted_maps = set(), set()
    text = str(docs)
    for match in re.finditer(r"'secretName': '([^']+)'", text):
        wanted_secrets.add(match.group(1))
    for match in re.finditer(r"'secretKeyRef': \{'name': '([^']+)'", text):
        wanted_secrets.add(match.group(1))
    for match in re.finditer(
        r"'configMapKeyRef': \{'name': '([^']+)'|'configMapRef': \{'name': '([^']+)'", text
    ):
        wanted_maps.add(match.group(1) or match.group(2))
    spec = trainer_spec(docs)
    wanted_secrets.add(spec["env_secret"])
    wanted_maps.add(spec["env_config_map"])
    assert wanted_maps <= config_maps
    if variant.startswith("dev"):
        assert wanted_secrets <= secrets  # the dev overlay generates every one
    else:
        assert not secrets  # prod carries no secret material
        assert wanted_secrets <= EXTERNAL_SECRETS
    guide = (ROOT / "deploy" / "README.md").read_text()
    for name in EXTERNAL_SECRETS:
        assert name in guide, f"deploy/README.md does not say how to create Secret {name}"


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "RuntimeClass", "PriorityClass"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_everything_lands_in_the_one_namespace(variant):
    docs = render(variant)
    (namespace,) = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    for doc in docs:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace") == namespace, (
                f"{doc['kind']}/{doc['metadata']['name']}"
            )
    for binding in (d for d in docs if d["kind"] == "RoleBinding"):
        assert {s.get("namespace") for s in binding["subjects"]} == {namespace}


@pytest.mark.parametrize("variant", ("dev", "prod"))
def test_the_console_accepts_its_probes_and_scrapes(variant):
    """Django answers 400 to a Host it does not allow: the kubelet's probes (Host: localhost) and
    Prometheus (Host: the pod IP) must be allowed, as must the public name, once Kubernetes has
    expanded $(VAR) references in the web container's environment."""
    docs = render(variant)
    web = find(docs, "Deployment", "crucible-web")["spec"]["template"]["spec"]["containers"][0]
    config = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "crucible-config"
    )["data"]
    values: dict[str, str] = {}
    for entry in web["env"]:  # Kubernetes expands $(NAME) with the variables defined before it
        if "value" in entry:
            values[entry["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: values.get(m.group(1), m.group(0)), entry["value"]
            )
        elif "fieldRef" in entry.get("valueFrom", {}):
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            values[entry["name"]] = "10.244.1.17"
        elif (
            "configMapKeyRef" in entry.get("valueFrom", {})
            and entry["valueFrom"]["configMapKeyRef"]["name"] == "crucible-config"
        ):
            values[entry["name"]] = config[entry["valueFrom"]["configMapKeyRef"]["key"]]
    allowed = [h.strip() for h in values["CRUCIBLE_ALLOWED_HOSTS"].split(",") if h.strip()]
    public = config["CRUCIBLE_PUBLIC_HOSTS"].split(",")[0]
    for host in ("localhost", "10.244.1.17", public):
        assert validate_host(host, allowed), (host, allowed)
    assert not validate_host("evil.example.net", allowed)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert web[probe]["httpGet"]["httpHeaders"] == [{"name": "Host", "value": "localhost"}]
        # liveness asks only whether the process answers: a restart cures no lost dependency
        expected = "/livez" if probe == "livenessProbe" else "/healthz"
        assert web[probe]["httpGet"]["path"] == expected
    if (
        variant == "prod"
    ):  # behind the Ingress: https there, plain HTTP for probes and scrapes in the cluster
        assert (
            config["CRUCIBLE_PRODUCTION"] == "true" and config["CRUCIBLE_SSL_REDIRECT"] == "false"
        )
        assert config["CRUCIBLE_CSRF_TRUSTED_ORIGINS"] == f"https://{public}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_web_serves_with_workers_within_its_cpu_limit(variant):
    """The web pods run `manage.py serve` (granian, several worker processes) with the worker
    count set in crucible-config (a container sees the node's CPUs, so it is not guessed), at
    most one worker per CPU of the limit, and the backpressure knobs set beside it."""
    docs = render(variant)
    (web,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "crucible-web"
    ]
    (container,) = [c for c in web["spec"]["template"]["spec"]["containers"] if c["name"] == "web"]
    assert container["command"][:3] == ["python", "manage.py", "serve"]
    (config,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("crucible-config")
    ]
    workers = int(config["data"]["CRUCIBLE_WEB_WORKERS"])
    assert 1 <= workers <= parse_quantity(container["resources"]["limits"]["cpu"])
    for knob in ("CONCURRENCY", "MAX_QUEUE", "QUEUE_TIMEOUT_MS"):
        assert int(config["data"][f"CRUCIBLE_WEB_{knob}"]) >= 0
