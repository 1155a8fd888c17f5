"""Data parallelism for the trainer: torch.distributed under ``torchrun``, a no-op alone.

``torchrun --nproc-per-node N manage.py run_trainer RUN_ID`` sets ``RANK``,
``WORLD_SIZE`` and ``MASTER_ADDR``/``MASTER_PORT``; :func:`setup` joins the process
group (NCCL with a GPU per rank, gloo on CPUs). Every helper below works with one
process and no process group too, so the trainer has a single code path.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    """Where this process stands: its rank, the world size and its device."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the database, the checkpoints' shared files and the events."""
        return self.rank == 0

    def shard(self, count: int) -> range:
        """This rank's contiguous share of ``count`` items (groups); earlier ranks take the
        remainder."""
        base, extra = divmod(count, self.world)
        start = self.rank * base + min(self.rank, extra)
        return range(start, start + base + (1 if self.rank < extra else 0))


def setup() -> Ranks:
    """Join the process group when launched by torchrun; pick this rank's device.

    Raises:
        RuntimeError: torchrun's environment is incomplete (from torch.distributed).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world == 1:
        return Ranks(device=device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Ranks(rank=dist.get_rank(), world=dist.get_world_size(), device=device)


def teardown() -> None:
    """Leave the process group. Unreachable objects are collected first: an FSDP2 module lives in
    reference cycles, and one freed only at interpreter exit, after its process group, aborts the
    process ("terminate called without an active exception", seen on gloo)."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def sum_across(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sum of ``values`` over all ranks (the values themselves when alone)."""
    if not active():
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def gather_lists(items: list) -> list:
    """Every rank's ``items`` concatenated in rank order (picklable objects)."""
    if not active():
        return list(items)
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, items)
    return [item for part in gathered for item in part]


def broadcast_value(value):
    """Rank 0's ``value`` on every rank (a decision only rank 0 can make, such as "cancelled")."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if active():
        dist.barrier()


def wrap(model: torch.nn.Module, ranks: Ranks) -> torch.nn.Module:
    """``model`` under DistributedDataParallel when there are several ranks (gradients all-reduced
    and averaged in backward), else ``model`` itself."""
    if not active():
        return model
    device_ids = [ranks.device.index] if ranks.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
