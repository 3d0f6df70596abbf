"""Data-parallel rollouts and sharded updates (training/distributed.py) with two gloo processes on the CPU.

What a user depends on: a step run by two processes, each on its half of the batch, leaves the
same parameters as one process on the whole batch (DDP and FSDP alike), every process ends with
identical weights, and metrics/objects are combined across processes. World size 1 is untouched.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from training import distributed as D

ROOT = Path(__file__).resolve().parents[2]


def _tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2)
    return LlamaForCausalLM(cfg)


def _batch():
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, 64, (4, 12), generator=g)  # (B, T)


def _train_step(model, ids: torch.Tensor) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return float(loss.detach())


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    info = D.init(device="cpu")
    for strategy in ("ddp", "fsdp"):  # one process group for both: spawning costs ~10 s
        model = D.wrap_model(_tiny_llama(), info, strategy)
        rows = D.shard(list(range(4)), info)               # data-parallel share of the episodes
        loss = _train_step(model, _batch()[rows])
        metrics = D.all_reduce_mean({"loss": loss, "rank": float(rank)}, info)
        gathered = D.gather_objects({"rank": rank, "rows": rows}, info)
        state = D.full_state_dict(model, info)
        torch.save({"state": state, "metrics": metrics, "gathered": gathered},
                   f"{out}/{strategy}-rank{rank}.pt")
    D.shutdown(info)
    D.exit_process(0)      # as the trainer's workers leave (D.exit_process says why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory):
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("gloo")
    mp.start_processes(_worker, args=(2, _free_port(), str(out)), nprocs=2,
                       start_method="spawn", join=True)
    return out


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_gloo_processes_match_one_process(two_process_results, strategy):
    r0, r1 = (torch.load(two_process_results / f"{strategy}-rank{r}.pt") for r in (0, 1))
    single = _tiny_llama()
    _train_step(single, _batch())
    ref = single.state_dict()
    for name, value in ref.items():
        assert torch.allclose(r0["state"][name], r1["state"][name], atol=0, rtol=0), name
        assert torch.allclose(r0["state"][name], value, atol=1e-5, rtol=1e-4), name
    assert r0["metrics"]["rank"] == pytest.approx(0.5)
    assert r0["metrics"] == r1["metrics"]
    assert [g["rows"] for g in r0["gathered"]] == [[0, 2], [1, 3]]


def test_world_size_one_is_identity(monkeypatch):
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    info = D.init(device="cpu")
    model = _tiny_llama()
    assert D.wrap_model(model, info, "fsdp") is model
    assert D.shard([1, 2, 3], info) == [1, 2, 3]
    assert D.all_reduce_mean({"a": 2.0}, info) == {"a": 2.0}
    assert D.gather_objects(5, info) == [5]
    with pytest.raises(D.ParallelConfigError, match="unknown parallel strategy"):
        D.wrap_model(model, info, "zero3")


EXIT_PROBE = """
import atexit, sys
from training import distributed as D
atexit.register(lambda: print("finalised", flush=True))
if sys.argv[1] == "left":
    D._LEFT_GROUP.append(True)          # what D.shutdown records once a group is torn down
print("checkpoint written", end="")     # still in the pipe's buffer: exit_process must flush it
D.exit_process(3)
"""


@pytest.mark.parametrize("left", [True, False])
def test_a_worker_that_left_its_group_exits_with_its_code_and_its_output(left):
    """A torchrun worker that has left its process group ends without the interpreter's teardown
    (where gloo once aborted a finished run), yet with its exit code and every line it printed;
    a process that never joined a group exits as usual."""
    proc = subprocess.run([sys.executable, "-c", EXIT_PROBE, "left" if left else "never"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout.startswith("checkpoint written")
    assert ("finalised" in proc.stdout) is (not left)


@pytest.mark.gpu
def test_torchrun_world_size_one_on_gpu(tmp_path):
    """The FSDP path through torchrun on one GPU (run on the device machine, never in CI)."""
    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    cmd = (f"{torchrun} --standalone --nproc_per_node=1 -m training.distributed "
           f"--strategy fsdp --out {tmp_path}/ok.json")
    proc = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ok.json").exists()
