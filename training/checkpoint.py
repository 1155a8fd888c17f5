"""Checkpoints of a training run: everything needed to continue it exactly where it stopped.

A checkpoint is a directory ``<run dir>/checkpoints/step-000003/`` holding

- ``model.pt``: the policy's ``state_dict`` (under LoRA only the adapters' entries, keys as
  wrapped);
- ``trainer-rank<r>.pt``, one per data-parallel rank: the step, the optimizer and
  scheduler state, the RNG states of Python, numpy, torch (CPU and every CUDA device)
  and of the rank's sampling generator, and the trainer's own state (the task
  sampler's RNG and counts, the replay queue of dropped rollouts);
- ``tokenizer.json`` and ``config.json``, so the directory can also be read by people.

A run with ``sharding: "fsdp2"`` writes no ``model.pt`` and no optimizer state in the rank
files: ``sharded/`` holds the model and the optimizer state written by
``torch.distributed.checkpoint`` (DCP), each rank its own shard (``__<r>_0.distcp``) and rank 0
the ``.metadata`` that says which slice of which tensor is where. DCP reads them back into any
layout (:func:`read_sharded`): the same ranks, another number of ranks, or one process with a
plain model. The rank files still carry each rank's RNG states; a rank the writer did not have
takes the shared states from rank 0's file (:func:`read_rank_state`).

It is written into ``step-000003.tmp/`` and published once complete through the run's
artefact store (training/artifacts.py). The default store renames it into place:
``rename`` is atomic on one filesystem, so a reader (a resuming trainer) sees a whole
checkpoint or none, even when the writer is killed half way. The S3 store uploads its
files, then a manifest last, and lists only checkpoints whose manifest is there; the
local directory stays as the working copy. The newest ``keep`` checkpoints are kept;
older ones are deleted (in the store and here) after the new one is published. A
trainer that resumes on a host without the working copy downloads the newest complete
checkpoint from the store (:func:`latest_checkpoint`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from training import artifacts
from training.artifacts import ArtifactStore

STEP_DIR = re.compile(r"^step-(\d{6})$")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used to resume (missing file, other world size)."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (the disk is full, or refused the write). Its half-written
    staging directory was removed; the message names the directory, the free space and the last
    good checkpoint, which is intact (a checkpoint is published only once complete)."""


@contextlib.contextmanager
def writing(run_directory: Path, step: int):
    """Turn a failed write of the checkpoint of ``step`` into a :class:`CheckpointWriteError`.

    ``torch.save`` reports a full disk as a ``RuntimeError`` from its zip writer ("file write
    failed"), ``open``/``fsync``/``rename`` as ``OSError``: both are taken here, the half-written
    staging directory is removed (giving back the space it took) and the error says what a user
    needs: where, how much is free, which checkpoint is still good.

    Raises:
        CheckpointWriteError: the write failed.
    """
    try:
        yield
    except (OSError, RuntimeError) as exc:
        staging = staging_dir(run_directory, step)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            free = f"{shutil.disk_usage(run_directory).free:,} bytes free"
        except OSError:
            free = "free space unknown"
        full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC or "write failed" in str(exc)
        done = sorted(
            p.name for p in checkpoints_dir(run_directory).glob("step-*") if STEP_DIR.match(p.name)
        )
        last = (
            f"the last good checkpoint, {checkpoints_dir(run_directory) / done[-1]}, is intact"
            if done
            else "no earlier checkpoint exists"
        )
        raise CheckpointWriteError(
            f"{'the disk is full: ' if full else ''}could not write the checkpoint of step {step} "
            f"under {run_directory} ({free}): {type(exc).__name__}: {exc}; {last}; free space "
            f"there and resume the run"
        ) from exc


def rng_states(generator: torch.Generator) -> dict:
    """The RNG states of Python, numpy, torch (CPU, CUDA) and the sampling ``generator``."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generator": generator.get_state(),
    }


def rng_restore(states: dict, generator: torch.Generator) -> None:
    """Put back what :func:`rng_states` took."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    generator.set_state(states["generator"])


def checkpoints_dir(run_directory: Path) -> Path:
    return run_directory / "checkpoints"


def complete_checkpoints(run_directory: Path, store: ArtifactStore | None = None) -> list[str]:
    """Names (``step-NNNNNN``, ascending) of the run's complete checkpoints in ``store`` (default:
    the settings').

    Raises:
        ArtifactStoreError: the store cannot be listed (the message says why).
    """
    store = store or artifacts.default_store()
    return [
        name
        for name in store.complete_dirs(store.key_of(checkpoints_dir(run_directory)))
        if STEP_DIR.match(name)
    ]


def latest_checkpoint(run_directory: Path, store: ArtifactStore | None = None) -> Path | None:
    """The newest complete checkpoint of a run as a local directory, or None (temporary directories,
    uploads without their manifest are ignored). A checkpoint that is only in the store (the
    trainer's disk was lost) is downloaded to its place under ``run_directory`` first.

    Raises:
        ArtifactStoreError: the store cannot be read (the message says why).
    """
    store = store or artifacts.default_store()
    names = complete_checkpoints(run_directory, store)
    if not names:
        return None
    return store.fetch_dir(store.key_of(checkpoints_dir(run_directory) / names[-1]))


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint directory was written after."""
    match = STEP_DIR.match(path.name)
    if not match:
        raise CheckpointError(f"{path} is not a checkpoint directory (step-NNNNNN)")
    return int(match.group(1))


def _save(obj, path: Path) -> None:
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


def staging_dir(run_directory: Path, step: int) -> Path:
    """A fresh temporary directory for the checkpoint of ``step`` (every rank writes into it)."""
    directory = checkpoints_dir(run_directory) / f"step-{step:06d}.tmp"
    return directory


def write_rank_state(
    staging: Path,
    *,
    rank: int,
    step: int,
    optimizer,
    scheduler,
    generator: torch.Generator,
    trainer_state: dict,
) -> None:
    """Write one rank's ``trainer-rank<r>.pt`` into ``staging`` (``optimizer`` None: its state is
    in the DCP shards)."""
    _save(
        {
            "step": step,
            "optimizer": None if optimizer is None else optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_states(generator),
            "trainer": trainer_state,
        },
        staging / f"trainer-rank{rank}.pt",
    )


SHARDED = "sharded"
"""The subdirectory of a checkpoint that holds its DCP shards (model and optimizer)."""


def _dcp_state(model, optimizer) -> dict:
    """``{"model": ...}`` and, once the optimizer holds state, ``"optimizer"``: DCP's state dicts
    keyed by parameter name (DTensor shards under FSDP2). An optimizer without state is left out
    rather than asked for its state dict, which would initialise it with a zero-rate step (AdamW's
    step count would then differ from a run that never checkpointed)."""
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415 (sharded runs only)
        get_model_state_dict,
        get_state_dict,
    )

    if not optimizer.state:
        return {"model": get_model_state_dict(model)}
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optimizer": optimizer_state}


def write_sharded(staging: Path, *, model, optimizer) -> None:
    """Write ``model``'s and ``optimizer``'s state into ``staging/sharded`` with
    ``torch.distributed.checkpoint``: every rank its own shard (a collective under torchrun: every
    rank calls it, after the staging directory exists). Keys are parameter names, so the
    optimizer state reads back into another sharding. An optimizer that has not stepped yet has
    no state to write."""
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415 (sharded runs only)

    dcp.save(_dcp_state(model, optimizer), checkpoint_id=staging / SHARDED)


def is_sharded(path: Path) -> bool:
    """Whether checkpoint ``path`` holds DCP shards (written by an FSDP2 run)."""
    return (path / SHARDED / ".metadata").is_file()


def read_sharded(path: Path, *, model, optimizer) -> None:
    """Load checkpoint ``path``'s DCP shards into ``model`` and ``optimizer`` in place, whatever
    their layout (FSDP2 on any number of ranks, or a plain model in one process): each rank reads
    the slices its own shards need (a collective under torchrun). A checkpoint written before the
    optimizer's first step leaves ``optimizer`` as it is (without state).

    Raises:
        CheckpointError: ``path`` holds no DCP shards.
    """
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415 (sharded runs only)
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    if not is_sharded(path):
        raise CheckpointError(f"{path} holds no {SHARDED}/.metadata (no sharded checkpoint)")
    saved = dcp.FileSystemReader(str(path / SHARDED)).read_metadata().state_dict_metadata
    if not any(key.startswith("optimizer.") for key in saved):
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=path / SHARDED)
        set_model_state_dict(model, state["model"])
        return
    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=path / SHARDED)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
    )


def write_readable(staging: Path, *, model, tokenizer) -> None:
    """Write the tokenizer and the model's config into ``staging`` (rank 0), for people and for a
    resume (the weights are elsewhere: ``model.pt`` or the DCP shards)."""
    tokenizer.save(str(staging / "tokenizer.json"))
    config = getattr(model, "config", None)
    if config is not None:
        config.to_json_file(staging / "config.json")


def write_model(staging: Path, *, model, tokenizer, trainable_only: bool = False) -> None:
    """Write the model weights, its config and the tokenizer into ``staging`` (rank 0 only).

    ``trainable_only`` (LoRA) keeps only the parameters that train: the frozen base is
    rebuilt from ``model_path`` on resume, so a checkpoint holds megabytes, not the base.
    """
    state = model.state_dict()
    if trainable_only:
        trained = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
        state = {name: value for name, value in state.items() if name in trained}
    _save(state, staging / "model.pt")
    write_readable(staging, model=model, tokenizer=tokenizer)


def publish(staging: Path, *, step: int, keep: int, store: ArtifactStore | None = None) -> Path:
    """Publish a complete staging directory through ``store`` and prune to the newest ``keep``.

    The default store renames it into place; the S3 store uploads it (manifest last) and
    then renames it into place as the working copy. Older checkpoints go from the store
    and from this host, and so do incomplete uploads the store still holds.

    Returns:
        The checkpoint's local path (``checkpoints/step-NNNNNN``).

    Raises:
        ArtifactStoreError: the store refused the upload or the pruning (the message says why).
    """
    store = store or artifacts.default_store()
    parent = store.key_of(staging.parent)
    final = store.publish_dir(staging, f"{parent}/step-{step:06d}")
    complete = [name for name in store.complete_dirs(parent) if STEP_DIR.match(name)]
    for old in complete[:-keep]:
        store.delete_dir(f"{parent}/{old}")
    # Leftovers of a writer killed half way through an upload or a pruning: never listed, never
    # resumed from, but they hold bytes. This writer is the run's only one, so they are garbage.
    for partial in store.incomplete_dirs(parent):
        if STEP_DIR.match(partial):
            store.delete_dir(f"{parent}/{partial}")
    kept = set(complete[-keep:])
    for local in final.parent.iterdir():  # working copies the store no longer keeps
        if STEP_DIR.match(local.name) and local.name not in kept:
            shutil.rmtree(local, ignore_errors=True)
    return final


def prepare_staging(run_directory: Path, step: int) -> Path:
    """Empty the staging directory of ``step`` (a killed writer may have left a half one)."""
    staging = staging_dir(run_directory, step)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def read_model_state(path: Path) -> dict:
    """The model ``state_dict`` of checkpoint ``path``.

    Raises:
        CheckpointError: ``model.pt`` is missing.
    """
    if not (path / "model.pt").exists():
        raise CheckpointError(f"{path} holds no model.pt")
    return torch.load(path / "model.pt", map_location="cpu", weights_only=True)


def read_rank_state(path: Path, rank: int) -> dict:
    """One rank's trainer state of checkpoint ``path``. A sharded checkpoint (:func:`is_sharded`)
    written by fewer ranks gives a rank it lacks rank 0's state with ``"own": False`` (the
    schedule and the sampler's state are the same on every rank; the caller reseeds that rank's
    sampling generator); a rank's own file gives ``"own": True``.

    Raises:
        CheckpointError: that rank's file is missing from a checkpoint written under DDP (the
            run was written with fewer ranks).
    """
    file = path / f"trainer-rank{rank}.pt"
    if not file.exists() and is_sharded(path) and (path / "trainer-rank0.pt").exists():
        return {**_load_rank_file(path / "trainer-rank0.pt"), "own": False}
    if not file.exists():
        raise CheckpointError(
            f"{path} holds no {file.name}: it was written by a run with fewer ranks; "
            f"resume with the same nproc_per_node"
        )
    return {**_load_rank_file(file), "own": True}


def _load_rank_file(file: Path) -> dict:
    # Not weights_only: the RNG states hold numpy arrays and tuples. The file is our own,
    # written into the run's directory by this trainer.
    return torch.load(file, map_location="cpu", weights_only=False)
