"""Checkpoints of a training run: everything needed to continue it exactly where it stopped.

A checkpoint is a directory ``<run dir>/checkpoints/step-000003/`` holding

- ``model.pt``: the policy's ``state_dict`` (under LoRA only the adapters' entries, keys as wrapped);
- ``trainer-rank<r>.pt``, one per data-parallel rank: the step, the optimizer and
  scheduler state, the RNG states of Python, numpy, torch (CPU and every CUDA device)
  and of the rank's sampling generator, and the trainer's own state (the task
  sampler's RNG and counts, the replay queue of dropped rollouts);
- ``tokenizer.json`` and ``config.json``, so the directory can also be read by people.

It is written into ``step-000003.tmp-<pid>/`` and renamed into place once complete:
``rename`` is atomic on one filesystem, so a reader (a resuming trainer) sees a whole
checkpoint or none, even when the writer is killed half way. The newest ``keep``
checkpoints are kept; older ones are deleted after the new one is in place.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

STEP_DIR = re.compile(r"^step-(\d{6})$")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used to resume (missing file, other world size)."""


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


def latest_checkpoint(run_directory: Path) -> Path | None:
    """The newest complete checkpoint of a run, or None (temporary directories are ignored)."""
    directory = checkpoints_dir(run_directory)
    if not directory.is_dir():
        return None
    steps = sorted(p for p in directory.iterdir() if STEP_DIR.match(p.name))
    return steps[-1] if steps else None


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint directory was written after."""
    match = STEP_DIR.match(path.name)
    if not match:
        raise CheckpointError(f"{path} is not a checkpoint directory (step-NNNNNN)")
    return int(match.group(1))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save(obj, path: Path) -> None:
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


def staging_dir(run_directory: Path, step: int) -> Path:
    """A fresh temporary directory for the checkpoint of ``step`` (every rank writes into it)."""
    directory = checkpoints_dir(run_directory) / f"step-{step:06d}.tmp"
    return directory


def write_rank_state(staging: Path, *, rank: int, step: int, optimizer, scheduler, generator: torch.Generator,
                     trainer_state: dict) -> None:
    """Write one rank's ``trainer-rank<r>.pt`` into ``staging``."""
    _save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_states(generator),
            "trainer": trainer_state,
        },
        staging / f"trainer-rank{rank}.pt",
    )


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
    tokenizer.save(str(staging / "tokenizer.json"))
    config = getattr(model, "config", None)
    if config is not None:
        config.to_json_file(staging / "config.json")


def publish(staging: Path, *, step: int, keep: int) -> Path:
    """Rename a complete staging directory into place and prune to the newest ``keep``.

    Returns:
        The checkpoint's final path.
    """
    final = staging.parent / f"step-{step:06d}"
    if final.exists():  # a step redone after a crash between publish and the step record
        shutil.rmtree(final)
    _fsync_dir(staging)
    os.rename(staging, final)
    _fsync_dir(final.parent)
    complete = sorted(p for p in final.parent.iterdir() if STEP_DIR.match(p.name))
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
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
    """One rank's trainer state of checkpoint ``path``.

    Raises:
        CheckpointError: that rank's file is missing (the run was written with fewer ranks).
    """
    file = path / f"trainer-rank{rank}.pt"
    if not file.exists():
        raise CheckpointError(f"{path} holds no {file.name}: it was written by a run with fewer ranks; "
                              f"resume with the same nproc_per_node")
    # Not weights_only: the RNG states hold numpy arrays and tuples. The file is our own,
    # written into the run's directory by this trainer.
    return torch.load(file, map_location="cpu", weights_only=False)
