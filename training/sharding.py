"""How the trainer holds the model across ranks: DDP (a replica per rank) or FSDP2 (shards).

``sharding: "ddp"`` (the default) keeps a whole float32 copy of the weights, gradients and
AdamW state on every rank and all-reduces gradients (training/distributed.py).
``sharding: "fsdp2"`` applies ``torch.distributed.fsdp.fully_shard`` to every transformer
block (the classes a ``transformers`` model lists in ``_no_split_modules``: ``GPT2Block``,
``Qwen2DecoderLayer``, ...) and then to the root, so each of ``W`` ranks holds ``1/W`` of the
float32 master weights, of the gradients and of the optimizer state; a block's parameters are
all-gathered for its forward and backward and its gradients reduce-scattered. With
``mixed_precision`` the gathered copies are bfloat16 (compute) while gradients are reduced and
the master weights updated in float32 (``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``). With one rank there is nothing to shard: the model trains as it is
(sharded checkpoints are still written, so a run can resume on another world size).

``activation_checkpointing`` recomputes each block's activations in backward instead of keeping
them (``transformers``' ``gradient_checkpointing_enable``, non-reentrant: one checkpoint per
block), under either sharding: about one more forward pass of compute for activations that no
longer grow with the number of blocks.

Rollouts sample from a plain (unsharded) model on every rank, ``policy.model``: generation runs
a different number of forward passes on each rank, which FSDP's per-block collectives cannot
follow. After every update :func:`gather_weights` copies the full weights from the shards into
it, one parameter at a time; the trainer times it (``timing/weight_gather_s``).

:func:`memory_report` measures what a rank holds: bytes per parameter of weights, gradients and
optimizer state, and the rank's peak memory.

Sources: PyTorch's FSDP2 tutorial (https://docs.pytorch.org/tutorials/intermediate/FSDP_tutorial.html)
and torchtitan's ``apply_fsdp``; ZeRO (Rajbhandari et al., 2020) for the bytes per parameter.
"""

from __future__ import annotations

import copy
import resource
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from training import distributed
from training.config import PRECISIONS, SHARDINGS

__all__ = ["PRECISIONS", "SHARDINGS", "Sharding", "prepare", "gather_weights", "memory_report"]


@dataclass(frozen=True)
class Sharding:
    """A run's sharding settings, resolved for its device.

    ``compute_dtype`` is the dtype of the gathered weights in forward and backward (FSDP2 only;
    DDP computes in float32).
    """

    mode: str = "ddp"
    activation_checkpointing: bool = False
    compute_dtype: torch.dtype = torch.float32

    @property
    def fsdp(self) -> bool:
        return self.mode == "fsdp2"

    @classmethod
    def from_config(cls, config, device: torch.device) -> Sharding:
        """The settings of a :class:`training.config.RunConfig` (already checked) on ``device``."""
        return cls(
            mode=config.sharding,
            activation_checkpointing=config.activation_checkpointing,
            compute_dtype=compute_dtype(config.mixed_precision, device)
            if config.sharding == "fsdp2"
            else torch.float32,
        )


def compute_dtype(precision: str, device: torch.device) -> torch.dtype:
    """bfloat16 for ``bf16``, and for ``auto`` on a CUDA device that supports it; else float32."""
    if precision == "bf16":
        return torch.bfloat16
    if precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a ``transformers`` model: the modules whose class is named in
    its ``_no_split_modules`` (``Qwen2DecoderLayer``, ``GPT2Block``, ...), in order.

    Raises:
        ValueError: the model names no block class, or none of its modules is one.
    """
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise ValueError(
            f"{type(model).__name__} names no transformer block class (_no_split_modules): "
            "FSDP2 shards a model block by block"
        )
    return blocks


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each transformer block's activations in backward (one checkpoint per block).

    Raises:
        ValueError: the model does not support gradient checkpointing.
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"{type(model).__name__} does not support activation checkpointing "
            "(config key 'activation_checkpointing')"
        )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False


def prepare(policy, ranks: distributed.Ranks, sharding: Sharding) -> torch.nn.Module:
    """The module the update differentiates, built from ``policy.model``.

    - DDP: ``policy.model`` itself (under DistributedDataParallel with several ranks); rollouts
      and updates share its parameters.
    - FSDP2 with several ranks: a copy of ``policy.model`` sharded block by block over all ranks
      (float32 master weights, ``sharding.compute_dtype`` compute); ``policy.model`` stays
      whole for rollouts, in the compute dtype, refreshed by :func:`gather_weights`. The copy is
      made in host memory and each block moves to the device as it is sharded: on the device the
      whole float32 model is held once, at load (4 bytes a parameter), never twice.
    - FSDP2 alone: ``policy.model`` itself (nothing to shard).

    Activation checkpointing is switched on first when asked for (on the trained module; the
    rollout copy generates without it).

    Raises:
        ValueError: the model has no transformer blocks or no activation checkpointing.
    """
    model = policy.model
    if not (sharding.fsdp and distributed.active()):
        if sharding.activation_checkpointing:
            enable_activation_checkpointing(model)
        return distributed.wrap(model, ranks)
    from torch.distributed.device_mesh import init_device_mesh  # noqa: PLC0415 (FSDP2 only)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: PLC0415

    # The copy is made in host memory: fully_shard moves each block to the device as it shards it,
    # so the device never holds the whole float32 model twice (4 bytes a parameter, not 8).
    device = next(model.parameters()).device
    trained = copy.deepcopy(model.to("cpu"))
    blocks = transformer_blocks(trained)
    if sharding.activation_checkpointing:
        enable_activation_checkpointing(trained)
    mesh = init_device_mesh(ranks.device.type, (ranks.world,))
    mixed = MixedPrecisionPolicy(param_dtype=sharding.compute_dtype, reduce_dtype=torch.float32)
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=mixed)
    fully_shard(trained, mesh=mesh, mp_policy=mixed)
    policy.model = model.to(device=device, dtype=sharding.compute_dtype)
    return trained


def sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds FSDP2 shards (DTensor parameters)."""
    return any(isinstance(p, DTensor) for p in model.parameters())


@torch.no_grad()
def gather_weights(trained: torch.nn.Module, rollout: torch.nn.Module) -> None:
    """Copy the full weights of the sharded ``trained`` into the whole ``rollout`` model (same
    parameter names), one parameter at a time: every rank all-gathers each parameter, so every
    rank must call this. A no-op when ``trained`` holds no shards (DDP or one rank: rollouts and
    update share the parameters).

    Raises:
        KeyError: ``rollout`` lacks a parameter of ``trained``.
    """
    if not sharded(trained):
        return
    targets = dict(rollout.named_parameters())
    for name, parameter in trained.named_parameters():
        full = parameter.full_tensor() if isinstance(parameter, DTensor) else parameter
        targets[name].copy_(full)


def full_state_dict(trained: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The float32 master weights of ``trained`` as whole CPU tensors (FQN -> tensor), on every
    rank (a collective under FSDP2: every rank must call it). A tied weight is listed once, under
    its first name (as ``save_pretrained`` writes it). A plain model's CPU tensors are its own, not
    copies."""
    # A tied weight (GPT-2's and Qwen2's output embedding) goes under its first name only.
    tied = {name for name, _ in trained.named_parameters(remove_duplicate=False)} - {
        name for name, _ in trained.named_parameters()
    }
    return {
        name: (value.full_tensor() if isinstance(value, DTensor) else value).detach().cpu()
        for name, value in trained.state_dict().items()
        if name not in tied
    }


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``tensor`` (its shard of a DTensor, else the tensor)."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def grad_norm_value(norm: torch.Tensor) -> float:
    """A float of the total norm ``clip_grad_norm_`` returns (a replicated DTensor under FSDP2)."""
    return float(norm.full_tensor() if isinstance(norm, DTensor) else norm)


def _bytes(tensors) -> int:
    return sum(local_tensor(t).numel() * local_tensor(t).element_size() for t in tensors)


def peak_memory_bytes(device: torch.device) -> int:
    """The rank's peak memory in bytes: CUDA's peak allocated by torch on a GPU, else the
    process's peak resident set size (``VmHWM``: everything the process touched, Python and
    libraries included)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak of :func:`peak_memory_bytes` again from now (CUDA's peak statistics; on the
    CPU the kernel's ``VmHWM`` through ``/proc/self/clear_refs``, where allowed)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def rank_memory(
    trained: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    *,
    rollout: torch.nn.Module | None = None,
) -> dict:
    """What this rank holds, in bytes: ``weights``, ``grads`` (what the trainable parameters'
    gradients take once a backward has run), ``optimizer`` (the state the optimizer holds now:
    AdamW's two moments and step, empty before its first step), ``rollout_weights`` (the whole
    copy rollouts sample from, 0 when ``trained`` holds no shards: then rollouts sample from the
    trained weights themselves) and ``peak`` (:func:`peak_memory_bytes`)."""
    parameters = list(trained.parameters())
    state = [
        value
        for per_param in optimizer.state.values()
        for value in per_param.values()
        if isinstance(value, torch.Tensor)
    ]
    return {
        "weights": _bytes(parameters),
        # A gradient has its parameter's (local) shape and dtype: counted whether or not one is
        # allocated right now (a step whose groups all tied trained nothing).
        "grads": _bytes(p for p in parameters if p.requires_grad),
        "optimizer": _bytes(state),
        "rollout_weights": _bytes(rollout.parameters())
        if rollout is not None and sharded(trained)
        else 0,
        "peak": peak_memory_bytes(device),
    }


def memory_report(
    trained: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    *,
    sharding: Sharding,
    rollout: torch.nn.Module | None = None,
) -> dict:
    """Every rank's :func:`rank_memory` (a collective: every rank calls it), with bytes per
    parameter: each rank's bytes over the model's parameter count, the largest over ranks.

    Returns:
        ``{"sharding", "activation_checkpointing", "compute_dtype", "parameters", "ranks": [per
        rank {"rank", "weights", "grads", "optimizer", "rollout_weights", "peak"} in bytes],
        "bytes_per_param": {"weights", "grads", "optimizer", "rollout_weights"}, "peak_bytes":
        the largest rank's peak}``. Under DDP with AdamW in float32 that is 4, 4, 8 bytes per
        parameter; under FSDP2 on ``W`` ranks 4/W, 4/W, 8/W.
    """
    # A DTensor's numel is the whole parameter's; tied parameters are listed once.
    count = sum(p.numel() for p in trained.parameters())
    mine = {"rank": dist.get_rank() if distributed.active() else 0}
    mine.update(rank_memory(trained, optimizer, device, rollout=rollout))
    ranks = distributed.gather_lists([mine])
    per_param = {
        key: round(max(r[key] for r in ranks) / max(1, count), 3)
        for key in ("weights", "grads", "optimizer", "rollout_weights")
    }
    return {
        "sharding": sharding.mode,
        "activation_checkpointing": sharding.activation_checkpointing,
        "compute_dtype": str(sharding.compute_dtype).removeprefix("torch."),
        "parameters": count,
        "ranks": ranks,
        "bytes_per_param": per_param,
        "peak_bytes": max(r["peak"] for r in ranks),
    }
