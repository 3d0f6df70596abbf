"""Training across several processes/GPUs: data-parallel rollouts and a sharded (FSDP) update.

Launch: `torchrun --nproc_per_node=N -m training.trainer --run DIR` (or `accelerate launch`, which
sets the same variables). Each process reads RANK / WORLD_SIZE / LOCAL_RANK, takes its share of
the step's episodes (`shard`), rolls them out with its own copy of the generation backend, and the
update runs with the model wrapped by `wrap_model`:
- "none": plain module (world size 1: exactly today's single-process trainer);
- "ddp":  DistributedDataParallel, gradients averaged across processes;
- "fsdp": FSDP2 (`fully_shard`) per decoder layer, then the root: parameters, gradients and
  optimiser state sharded, gathered layer by layer for forward and backward.
The switch is a config string (`trainer.parallel`). Without torchrun variables, or with world size
1, nothing is initialised and every helper is the identity, so CPU runs work as before.

Metrics computed per process are averaged with `all_reduce_mean`; checkpoints are written by rank
0 from `full_state_dict` (gathered from the shards).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

STRATEGIES = ("none", "ddp", "fsdp")


class ParallelConfigError(ValueError):
    """A parallel setting that cannot work here (the message says which and what to do)."""


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1 and dist.is_available() and dist.is_initialized()


def init(device: str = "auto", backend: str | None = None, timeout_s: float = 600.0) -> DistInfo:
    """Join the process group torchrun started (or stay single-process without one).

    NCCL on CUDA, gloo on the CPU; each process takes GPU LOCAL_RANK.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise ParallelConfigError("device 'cuda' was asked for but no CUDA device is visible.")
    if use_cuda:
        if local >= torch.cuda.device_count():
            raise ParallelConfigError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} "
                                      "GPUs: start torchrun with --nproc_per_node <= the GPU count.")
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend or ("nccl" if use_cuda else "gloo"),
                                timeout=timedelta(seconds=timeout_s),
                                device_id=dev if use_cuda else None)
    return DistInfo(rank, world, local, dev)


_LEFT_GROUP: list[bool] = []     # set once shutdown() has torn a process group down


def shutdown(info: DistInfo) -> None:
    """Leave the process group together: once in a CI run (2 gloo processes on 2 busy cores) rank 1
    aborted right after its last step ("terminate called without an active exception", SIGABRT)
    while rank 0 was still writing the final checkpoint; a barrier first means neither process
    tears its group down while the other may still use it."""
    if info.active:
        try:
            dist.barrier()
        except Exception:        # the other process is gone already: nothing left to wait for
            pass
        dist.destroy_process_group()
        _LEFT_GROUP.append(True)


def exit_process(code: int) -> None:
    """End a torchrun worker that has left its process group without the interpreter's
    finalisation. The barrier in shutdown() was not enough: a later CI run (2 gloo processes on
    2 busy cores) still saw rank 1 abort with "terminate called without an active exception"
    after the final checkpoint and the "finished" event were written, so torchrun failed the
    whole run. Gloo's C++ threads can still release tensors while the interpreter tears itself
    down; skipping that teardown (os._exit) skips the abort. Everything the run owes is on disk
    by then: checkpoints and metrics are written whole and closed, and Trainer.run's `finally`
    has closed the watcher and the reward sandboxes. A process that never joined a group exits
    as usual."""
    if not _LEFT_GROUP:
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe: nothing more can reach it anyway
            pass
    os._exit(code)


def shard(items: list, info: DistInfo) -> list:
    """This process's share of a step's items (round-robin: shares differ by at most one)."""
    return items[info.rank::info.world_size]


def seed_for(seed: int, info: DistInfo) -> int:
    """Per-process sampling seed: processes must not draw identical rollouts."""
    return seed * 1_000_003 + info.rank


def decoder_layers(model) -> list[torch.nn.Module]:
    """The repeated transformer blocks (the FSDP wrapping unit) of a HF causal LM or critic."""
    for m in model.modules():
        layers = getattr(m, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
            return list(layers)
    return []


def wrap_model(model: torch.nn.Module, info: DistInfo, strategy: str = "none",
               *, mixed_bf16: bool = False) -> torch.nn.Module:
    """The model as the update should see it (module docstring); identity at world size 1."""
    if strategy not in STRATEGIES:
        raise ParallelConfigError(f"unknown parallel strategy {strategy!r}: choose one of "
                                  f"{', '.join(STRATEGIES)}.")
    if strategy == "none" or not info.active:
        return model
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [info.device.index] if info.device.type == "cuda" else None
        # broadcast_buffers=False: the only buffers are constant (rotary inv_freq), and a buffer
        # broadcast in every forward would make no-grad scoring passes collective too
        return DDP(model, device_ids=ids, broadcast_buffers=False)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if mixed_bf16 else MixedPrecisionPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def all_reduce_mean(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Average scalar metrics over processes (identity at world size 1)."""
    if not info.active or not values:
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    t /= info.world_size
    return dict(zip(keys, t.tolist()))


def all_reduce_sum(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Sum scalar counts over processes (tokens, episodes)."""
    if not info.active or not values:
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return dict(zip(keys, t.tolist()))


def gather_objects(obj, info: DistInfo) -> list:
    """Every process's `obj` (e.g. trajectory records) on every process, in rank order."""
    if not info.active:
        return [obj]
    out: list = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def _full(value: torch.Tensor) -> torch.Tensor:
    """A DTensor (an FSDP shard) gathered whole (collective); a plain tensor as it is."""
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def full_state_dict(model: torch.nn.Module, info: DistInfo) -> dict[str, torch.Tensor]:
    """Unsharded CPU state dict (same names as the plain model) for checkpoints and weight sync.

    Every process must call it (FSDP shards are gathered one tensor at a time, in the state
    dict's order, which is the same on every process); all receive the full dict. Works on the
    FSDP root and on a module inside it (the trainer's policy sits inside a log-prob wrapper).
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    if isinstance(model, DDP):  # replicated: the inner module's own names
        model = model.module
    return {k: _full(v).detach().cpu() for k, v in model.state_dict().items()}


def full_optim_state_dict(opt: torch.optim.Optimizer, info: DistInfo) -> dict:
    """`opt.state_dict()` with every sharded state tensor gathered whole, on the CPU: the same
    format (integer parameter ids) a one-process optimiser writes, so either can load it.
    Collective under FSDP (every process calls it)."""
    sd = opt.state_dict()
    state = {k: {name: (_full(v).detach().cpu() if isinstance(v, torch.Tensor) else v)
                 for name, v in sorted(sd["state"][k].items())} for k in sorted(sd["state"])}
    return {"state": state, "param_groups": sd["param_groups"]}


def load_full_optim_state_dict(opt: torch.optim.Optimizer, sd: dict, info: DistInfo) -> None:
    """Load a whole (one-process format) optimiser state into `opt`, whose parameters may be FSDP
    shards: each state tensor shaped like its parameter is split the way the parameter is."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    params = [p for group in opt.param_groups for p in group["params"]]
    state = {}
    for k in sorted(sd["state"]):
        param = params[int(k)]
        entry = {}
        for name, v in sorted(sd["state"][k].items()):
            if isinstance(param, DTensor) and isinstance(v, torch.Tensor) \
                    and v.shape == param.shape:
                v = distribute_tensor(v.to(param.device), param.device_mesh, param.placements)
            entry[name] = v
        state[k] = entry
    opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})


@torch.no_grad()
def copy_full_params(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    """dst's parameters := src's, gathered whole where src holds FSDP shards (collective; same
    parameter order on every process). dst is a plain copy of src's module tree."""
    pairs = dict(src.named_parameters())
    for name, p in dst.named_parameters():
        p.copy_(_full(pairs[name]).to(p.device, p.dtype))


def broadcast_object(obj, info: DistInfo):
    """Rank 0's `obj` on every process (identity at world size 1)."""
    if not info.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def any_true(flag: bool, info: DistInfo) -> bool:
    """True on every process when `flag` is true on any (the agreement on a stop or a failure)."""
    if not info.active:
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def barrier(info: DistInfo) -> None:
    if info.active:
        dist.barrier()


def _selftest(strategy: str, out: str) -> None:
    """One sharded training step of a small random Llama under torchrun: the device check that
    the parallel path runs (tests/training/test_distributed.py's gpu test runs it)."""
    import json

    from transformers import LlamaConfig, LlamaForCausalLM

    info = init()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    model = wrap_model(LlamaForCausalLM(cfg).to(info.device), info, strategy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (8, 64), device=info.device)[shard(list(range(8)), info)]
    losses = []
    for _ in range(3):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    state = full_state_dict(model, info)
    metrics = all_reduce_mean({"loss": losses[-1]}, info)
    if info.is_main:
        with open(out, "w") as f:
            json.dump({"world_size": info.world_size, "strategy": strategy, "losses": losses,
                       "mean_loss": metrics["loss"], "params": len(state),
                       "device": str(info.device)}, f)
    shutdown(info)
    if losses[-1] >= losses[0]:
        raise SystemExit(f"loss did not fall over 3 steps: {losses}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="torchrun self-test of the parallel training path")
    ap.add_argument("--strategy", default="fsdp", choices=STRATEGIES)
    ap.add_argument("--out", default="distributed_selftest.json")
    a = ap.parse_args()
    _selftest(a.strategy, a.out)
