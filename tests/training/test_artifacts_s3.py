"""Checkpoints in object storage: the S3 artefact store against moto's standalone S3 server
(real HTTP S3 API traffic through boto3), and a tiny training run whose checkpoints go to the
bucket and come back from it when the trainer's disk lost them."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import uuid

import boto3
import pytest
from django.conf import settings
from moto.server import ThreadedMotoServer

from tests.ports import free_port
from tests.training.conftest import finish, launch, tiny_run, wait_for
from training import checkpoint, services
from training.artifacts import (
    MANIFEST,
    ArtifactNotFound,
    ArtifactStoreError,
    LocalStore,
    S3Store,
    store_from_url,
)
from training.models import StepMetric, TrainingRun
from training.paths import run_dir

MiB = 2**20
PREFIX = "team/crucible"


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server on a free port of this host, for this module."""
    logging.getLogger("werkzeug").setLevel(
        logging.WARNING
    )  # not a line per request in a failure's report
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_env(s3_endpoint, monkeypatch, tmp_path):
    """The standard AWS variables pointing boto3 (here and in child processes) at the moto
    server."""
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    return s3_endpoint


@pytest.fixture
def bucket(aws_env) -> str:
    name = f"crucible-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def store(bucket, tmp_path) -> S3Store:
    # A 5 MiB threshold and part size (S3's smallest part) make an 11 MiB file a 3-part upload.
    return S3Store(
        bucket,
        PREFIX,
        cache_root=tmp_path / "var",
        multipart_threshold=5 * MiB,
        multipart_chunksize=5 * MiB,
    )


def objects(bucket: str, prefix: str = "") -> list[str]:
    pages = (
        boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    )
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def stage(store: S3Store, run: str, step: int, files: dict[str, bytes]):
    """A complete staging directory of ``step`` as the trainer leaves it."""
    staging = checkpoint.prepare_staging(store.cache_root / "runs" / run, step)
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    return staging


def test_saved_checkpoint_is_listed_complete_and_downloads_byte_for_byte(store, bucket):
    files = {
        "model.pt": os.urandom(11 * MiB + 123),
        "trainer-rank0.pt": os.urandom(4096),
        "tokenizer.json": b'{"model": {}}',
        "sub/extra.json": b"[]",
    }
    staging = stage(store, "7-1", 3, files)

    final = checkpoint.publish(staging, step=3, keep=2, store=store)

    assert final == store.cache_root / "runs/7-1/checkpoints/step-000003" and not staging.exists()
    assert checkpoint.complete_checkpoints(store.cache_root / "runs/7-1", store) == ["step-000003"]
    base = f"{PREFIX}/runs/7-1/checkpoints/step-000003/"
    assert objects(bucket, base) == sorted(base + name for name in [*files, MANIFEST])
    manifest = json.loads(
        boto3.client("s3").get_object(Bucket=bucket, Key=base + MANIFEST)["Body"].read()
    )
    assert manifest["files"] == {name: len(data) for name, data in files.items()}
    # the large file went up as a multipart upload of three 5 MiB parts (the ETag says how many)
    assert (
        boto3.client("s3")
        .head_object(Bucket=bucket, Key=base + "model.pt")["ETag"]
        .strip('"')
        .endswith("-3")
    )

    shutil.rmtree(store.cache_root)  # the trainer's disk is gone (a new pod)
    fetched = checkpoint.latest_checkpoint(store.cache_root / "runs/7-1", store)

    assert fetched == final
    assert {
        p.relative_to(fetched).as_posix(): p.read_bytes() for p in fetched.rglob("*") if p.is_file()
    } == files
    assert not [p for p in fetched.parent.iterdir() if p != fetched]  # no temporary download left


def test_an_upload_without_its_manifest_is_never_listed_nor_resumed_from_and_is_cleaned_up(
    store, bucket
):
    checkpoint.publish(stage(store, "8-1", 1, {"model.pt": b"one"}), step=1, keep=3, store=store)
    # what a trainer killed half way through uploading step 2 leaves: files, no manifest
    s3 = boto3.client("s3")
    s3.put_object(
        Bucket=bucket, Key=f"{PREFIX}/runs/8-1/checkpoints/step-000002/model.pt", Body=b"half"
    )
    shutil.rmtree(store.cache_root)

    assert checkpoint.complete_checkpoints(store.cache_root / "runs/8-1", store) == ["step-000001"]
    latest = checkpoint.latest_checkpoint(store.cache_root / "runs/8-1", store)
    assert latest.name == "step-000001" and (latest / "model.pt").read_bytes() == b"one"
    with pytest.raises(ArtifactNotFound):
        store.fetch_dir("runs/8-1/checkpoints/step-000002")

    # the resumed run publishes step 2 again and 3: the half upload's leftovers go with the pruning
    s3.put_object(
        Bucket=bucket,
        Key=f"{PREFIX}/runs/8-1/checkpoints/step-000000/model.pt",
        Body=b"cut-off prune",
    )
    for step in (2, 3):
        checkpoint.publish(
            stage(store, "8-1", step, {"model.pt": b"again"}), step=step, keep=3, store=store
        )
    assert {key.split("/")[-2] for key in objects(bucket, f"{PREFIX}/runs/8-1/")} == {
        "step-000001",
        "step-000002",
        "step-000003",
    }
    assert store.incomplete_dirs("runs/8-1/checkpoints") == []


def test_a_step_published_again_replaces_the_old_files(store, bucket):
    checkpoint.publish(
        stage(store, "9-1", 4, {"model.pt": b"old", "stale.pt": b"x"}), step=4, keep=2, store=store
    )
    checkpoint.publish(stage(store, "9-1", 4, {"model.pt": b"new"}), step=4, keep=2, store=store)
    shutil.rmtree(store.cache_root)

    fetched = store.fetch_dir("runs/9-1/checkpoints/step-000004")

    assert (
        sorted(p.name for p in fetched.iterdir()) == ["model.pt"]
        and (fetched / "model.pt").read_bytes() == b"new"
    )
    assert objects(bucket, f"{PREFIX}/runs/9-1/") == [
        f"{PREFIX}/runs/9-1/checkpoints/step-000004/{n}" for n in (MANIFEST, "model.pt")
    ]


def test_prune_keeps_the_newest_n_in_the_bucket_and_on_disk(store, bucket):
    for step in range(1, 6):
        checkpoint.publish(
            stage(store, "10-1", step, {"model.pt": bytes([step])}), step=step, keep=2, store=store
        )

    assert checkpoint.complete_checkpoints(store.cache_root / "runs/10-1", store) == [
        "step-000004",
        "step-000005",
    ]
    assert {key.split("/")[-2] for key in objects(bucket, f"{PREFIX}/runs/10-1/")} == {
        "step-000004",
        "step-000005",
    }
    assert sorted(p.name for p in (store.cache_root / "runs/10-1/checkpoints").iterdir()) == [
        "step-000004",
        "step-000005",
    ]


def test_single_artefacts_round_trip(store, bucket):
    local = store.local_path("runs/11-1/reference-model.pt")
    local.parent.mkdir(parents=True)
    local.write_bytes(b"reference")

    assert (
        store.put_file("runs/11-1/reference-model.pt")
        == f"s3://{bucket}/{PREFIX}/runs/11-1/reference-model.pt"
    )
    local.unlink()
    assert store.fetch_file("runs/11-1/reference-model.pt").read_bytes() == b"reference"
    with pytest.raises(ArtifactNotFound):
        store.fetch_file("runs/11-1/nothing.pt")


def test_a_missing_bucket_says_which_and_how_to_fix_it(aws_env, tmp_path):
    missing = S3Store("no-such-bucket-here", "x", cache_root=tmp_path)

    with pytest.raises(ArtifactStoreError) as checked:
        missing.check("runs/1-1")
    message = str(checked.value)
    assert "s3://no-such-bucket-here/x" in message and aws_env in message
    assert "bucket 'no-such-bucket-here' does not exist" in message and "create it" in message

    staging = tmp_path / "runs/1-1/checkpoints/step-000001.tmp"
    staging.mkdir(parents=True)
    (staging / "model.pt").write_bytes(b"w")
    with pytest.raises(ArtifactStoreError, match="bucket 'no-such-bucket-here' does not exist"):
        missing.publish_dir(staging, "runs/1-1/checkpoints/step-000001")


def test_an_unreachable_endpoint_says_so(aws_env, monkeypatch, tmp_path):
    port = free_port()  # a port nobody listens on
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")

    with pytest.raises(ArtifactStoreError) as raised:
        S3Store("bucket", cache_root=tmp_path).check("runs/1-1")

    assert "cannot reach the endpoint" in str(raised.value) and f"127.0.0.1:{port}" in str(
        raised.value
    )
    assert "AWS_ENDPOINT_URL_S3" in str(raised.value)


def test_store_urls(aws_env, tmp_path):
    assert isinstance(store_from_url("", cache_root=tmp_path), LocalStore)
    assert store_from_url("", cache_root=tmp_path).in_place
    shared = store_from_url("file:///mnt/shared", cache_root=tmp_path)
    assert isinstance(shared, LocalStore) and shared.location("runs/a") == "/mnt/shared/runs/a"
    s3 = store_from_url("s3://models/teams/rl/", cache_root=tmp_path)
    assert (s3.bucket, s3.prefix, s3.location("runs/a")) == (
        "models",
        "teams/rl",
        "s3://models/teams/rl/runs/a",
    )
    for bad, words in [
        ("s3://", "s3://BUCKET"),
        ("gs://b/p", "unknown scheme 'gs'"),
        ("file://relative/path", "absolute path"),
    ]:
        with pytest.raises(ArtifactStoreError, match="CRUCIBLE_ARTIFACT_STORE") as raised:
            store_from_url(bad, cache_root=tmp_path)
        assert words in str(raised.value)


def test_file_store_on_a_shared_mount_copies_and_restores(tmp_path):
    store = LocalStore(tmp_path / "shared", cache_root=tmp_path / "var")
    run = tmp_path / "var/runs/12-1"
    staging = checkpoint.prepare_staging(run, 1)
    (staging / "model.pt").write_bytes(b"weights")

    checkpoint.publish(staging, step=1, keep=1, store=store)
    shutil.rmtree(tmp_path / "var")

    assert (
        tmp_path / "shared/runs/12-1/checkpoints/step-000001/model.pt"
    ).read_bytes() == b"weights"
    assert (checkpoint.latest_checkpoint(run, store) / "model.pt").read_bytes() == b"weights"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_run_checkpoints_to_s3_and_resumes_from_it_after_losing_its_disk(
    trained_task_set, bucket, monkeypatch
):
    monkeypatch.setenv(
        "CRUCIBLE_ARTIFACT_STORE", f"s3://{bucket}/e2e"
    )  # the trainer processes' setting
    store = S3Store(bucket, "e2e", cache_root=settings.VAR_DIR)
    run = tiny_run(
        trained_task_set, steps=5, kl_coef=0.01
    )  # a KL reference: one more artefact to restore
    directory = run_dir(run.pk)

    proc = launch(run)
    wait_for(
        lambda: checkpoint.complete_checkpoints(directory, store)[-1:] >= ["step-000002"], proc=proc
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    newest = checkpoint.complete_checkpoints(directory, store)[-1]
    shutil.rmtree(
        directory
    )  # the trainer pod's disk is gone: checkpoints, KL reference, everything
    services.run_transition(
        run_id=run.pk, to_status=TrainingRun.INTERRUPTED, reason="pod lost (test)"
    )

    out = finish(launch(run))

    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["resumed_from_step"] == int(newest.removeprefix("step-")) < 5
    assert [s.step for s in StepMetric.objects.filter(run=run).order_by("step")] == [1, 2, 3, 4, 5]
    base = f"e2e/runs/{directory.name}"
    assert run.summary["checkpoint"] == f"s3://{bucket}/{base}/checkpoint-final"
    assert checkpoint.complete_checkpoints(directory, store) == ["step-000004", "step-000005"]
    keys = objects(bucket, base + "/")
    assert f"{base}/reference-model.pt" in keys and f"{base}/checkpoint-final/{MANIFEST}" in keys
    assert f"{base}/checkpoint-final/model.safetensors" in keys
    assert not [
        k
        for k in keys
        if "/checkpoints/" in k and "/step-000004/" not in k and "/step-000005/" not in k
    ]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_run_on_a_missing_bucket_fails_at_once_with_the_reason(
    trained_task_set, aws_env, monkeypatch
):
    monkeypatch.setenv("CRUCIBLE_ARTIFACT_STORE", "s3://no-such-bucket-here/runs")
    run = tiny_run(trained_task_set, steps=2)

    proc = launch(run)
    out = finish(proc, timeout_s=120)

    run.refresh_from_db()
    assert proc.returncode != 0 and run.status == TrainingRun.FAILED, out
    assert run.status_reason.startswith(
        "ArtifactStoreError: artefact store s3://no-such-bucket-here/runs"
    ), run.status_reason
    assert "bucket 'no-such-bucket-here' does not exist; create it" in run.status_reason
    assert "Traceback" not in run.status_reason
    assert not StepMetric.objects.filter(run=run).exists()  # failed before training anything


def test_a_sharded_checkpoint_goes_to_s3_and_loads_back_from_it(store, bucket):
    """A DCP checkpoint (its ``.metadata`` and shard files under ``sharded/``) is uploaded whole,
    and after the disk is lost it downloads and loads into a fresh model and optimizer exactly."""
    import torch  # noqa: PLC0415 (this module's other tests need no torch)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(3, 8)).sum().backward()
    optimizer.step()
    staging = checkpoint.prepare_staging(store.cache_root / "runs" / "9-1", 4)
    checkpoint.write_sharded(staging, model=model, optimizer=optimizer)
    checkpoint.publish(staging, step=4, keep=2, store=store)
    base = f"{PREFIX}/runs/9-1/checkpoints/step-000004/"
    assert {base + "sharded/.metadata", base + "sharded/__0_0.distcp"} <= set(objects(bucket, base))

    shutil.rmtree(store.cache_root)  # the trainer's disk is gone (a new pod)
    fetched = checkpoint.latest_checkpoint(store.cache_root / "runs/9-1", store)
    assert checkpoint.is_sharded(fetched)
    torch.manual_seed(1)
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    checkpoint.read_sharded(fetched, model=fresh, optimizer=fresh_optimizer)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    for a, b in zip(optimizer.state.values(), fresh_optimizer.state.values()):
        assert all(torch.equal(a[k], b[k]) for k in ("step", "exp_avg", "exp_avg_sq"))
