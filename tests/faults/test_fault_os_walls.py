"""Untrusted code behind the operating system's walls, and a gate that never wedges.

Hostile reward modules got out of the audit-hook sandbox in five ways; each is written here from
the report of those escapes and tried where untrusted code runs: the trainer's reward scoring (the
functions `Trainer.run_step` calls, and one real trainer step), the gate's replay of a committed
module and the pre-commit hook, and ColBench answer scoring.
1. processes: `multiprocessing.util.spawnv_passfds` (CPython's private `_posixsubprocess`, no
   audit event) starting a detached session that writes in /tmp and outlives the call;
2. files by descriptor: `dir_fd=` calls into the venv, a canary in a home folder, and the
   parent's /proc/PID/environ;
3. special files: a FIFO in /tmp, a FIFO and a character device in the caller's working folder;
4. shared memory: a POSIX shared-memory object, and more of it than the sandbox's /dev/shm holds;
5. a result that crashes the caller: a forged result line nested 200,000 levels deep, and an
   honest return value nested 100,000 deep.
Beyond those five, tried by hand on the old sandbox: a subinterpreter (it has none of the hook)
and patching posixpath's helpers (the hook's realpath) got out as written here; rewriting the
hook's helper through a refusal's traceback frame got out in its form for the old hook (its
`inside` closure); raising RLIMIT_AS was refused by this machine's kernel (root without
CAP_SYS_RESOURCE), not by the old hook; files of RLIMIT_FSIZE each filled the host's disk from
the child's folder (test_the_childs_folder_...). Run against the old sandbox, 9 of the 15
attacks below got out or crashed the caller; the two `dir_fd` reads were refused by the old hook
in this form (the reported route was not reproduced), and with the hook off here the
namespaces hold them. Two more, from a later read of the hook: emptying the dict it read its
link/rename/remove allowances from, reached through `sys.modules['__main__']` or through its frame
on a refusal's traceback; without namespaces both made a link in the caller's folder, until the
hook held only values nothing can change.

An attack returns 1.0 only when it got what it came for (a reward of 1.0 means it got out), and
after every test `traces()` finds nothing it could have left on this machine: a file in /tmp,
/dev/shm, the caller's folder or the venv, or a process. The same attacks run with the audit hook
switched off (the namespaces and the seccomp filter alone hold) and without namespaces (the
seccomp filter and the hook alone hold, as where the kernel refuses namespaces).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sysconfig
import uuid
from pathlib import Path

import pytest

from gate_testkit import PERSON, WHY, commit, make_experiment, set_knob, write, ws_of
from toy_env import KNOBS, write_run, write_workspace
from training import isolation as isolation_mod
from training import metrics, rewards, sandbox
from training.benches.base import Task
from training.benches.colbench.scorer import ReferenceCache, score_answer

NAMESPACES = sandbox.isolation().namespaces
SECCOMP = sandbox.isolation().seccomp is not None
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason=(
    "bwrap cannot create namespaces on this machine (not installed, or the kernel refuses them): "
    "the sandbox runs degraded here, see README, 'What the sandbox protects against'"))
needs_seccomp = pytest.mark.skipif(not SECCOMP, reason=(
    "no seccomp filter on this machine (libseccomp missing or the kernel refuses it)"))
# Where untrusted code runs, either OS layer with the hook contains every attack below (the
# two tests that follow show each); with the hook alone, `_posixsubprocess` still gets out.
needs_os_walls = pytest.mark.skipif(not (NAMESPACES or SECCOMP), reason=(
    "neither namespaces (bwrap) nor a seccomp filter (libseccomp) on this machine: the sandbox "
    "runs on its audit hook alone here, see README, 'What the sandbox protects against'"))


@pytest.fixture
def targets(tmp_path, monkeypatch):
    """What the attacks aim at, named by a token no other test uses; cleans up after a test
    that failed because something got out (files removed, processes killed by their pid)."""
    token = f"eau17-{uuid.uuid4().hex[:12]}"
    home = tmp_path / "home"
    home.mkdir()
    (home / "canary.txt").write_text(f"{token}-secret")
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)                     # the caller's working folder
    t = {"token": token, "home": str(home), "caller": str(caller), "pid": os.getpid(),
         "venv": sysconfig.get_paths()["purelib"]}
    yield t
    for found in traces(t):
        if found.startswith("process "):
            os.kill(int(found.split()[1]), signal.SIGKILL)
        else:
            Path(found).unlink(missing_ok=True)


def traces(t: dict) -> list[str]:
    """Everything an attack of token t left outside its sandbox folder."""
    tok = t["token"]
    found = [str(p) for folder in ("/tmp", "/dev/shm", t["caller"], t["venv"])
             for p in Path(folder).glob(f"*{tok}*")]
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if tok.encode() in (proc / "cmdline").read_bytes():
                found.append(f"process {proc.name}")
        except OSError:                            # it ended while we looked
            pass
    return found


def attacks(t: dict) -> dict[str, str]:
    """Bodies of `attack()` (indented 4): each returns 1.0 only if it got out."""
    tok, home, caller, pid, venv = t["token"], t["home"], t["caller"], t["pid"], t["venv"]
    return {
        # 1. processes
        "spawn_private_entry": (
            "import multiprocessing.util as u\n"
            f"    u.spawnv_passfds(b'/bin/sh', [b'sh', b'-c', b'echo x > /tmp/{tok}-proc; "
            f"setsid sh -c \"sleep 120; : {tok}\" &'], ())\n"
            "    return 1.0"),
        # 2. files by descriptor
        "dir_fd_write_venv": (
            "import os\n"
            f"    fd = os.open({venv!r}, os.O_RDONLY)\n"
            f"    os.close(os.open('{tok}-escape.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))\n"
            "    return 1.0"),
        "dir_fd_read_home": (
            "import os\n"
            f"    fd = os.open({home!r}, os.O_RDONLY)\n"
            "    data = os.read(os.open('canary.txt', os.O_RDONLY, dir_fd=fd), 100).decode()\n"
            f"    return 1.0 if {tok!r} in data else 0.0"),
        "dir_fd_read_parent_environ": (
            "import os\n"
            "    fd = os.open('/proc', os.O_RDONLY)\n"
            f"    data = os.read(os.open('{pid}/environ', os.O_RDONLY, dir_fd=fd), 1 << 16)\n"
            "    return 1.0 if b'PATH=' in data else 0.0"),
        # 3. special files
        "fifo_in_tmp": f"import os\n    os.mkfifo('/tmp/{tok}-fifo')\n    return 1.0",
        "fifo_in_caller": f"import os\n    os.mkfifo({caller + '/' + tok + '-fifo'!r})\n    return 1.0",
        "device_in_caller": (
            "import os, stat\n"
            f"    os.mknod({caller + '/' + tok + '-null'!r}, stat.S_IFCHR | 0o666, os.makedev(1, 3))\n"
            "    return 1.0"),
        # 4. shared memory (inside the sandbox it may exist, in its own /dev/shm: 0.5, not 1.0)
        "posix_shared_memory": (
            "from multiprocessing import shared_memory\n"
            f"    m = shared_memory.SharedMemory(name='{tok}-shm', create=True, size=1 << 20)\n"
            "    m.buf[:4] = b'eau!'\n"
            "    return 0.5"),
        "shared_memory_beyond_limits": (    # files of RLIMIT_FSIZE each, twice the tmpfs in all
            "import os\n"
            "    for i in range(128):\n"
            f"        with open(f'/dev/shm/{tok}-{{i}}', 'wb') as f:\n"
            "            f.write(b'x' * 1_000_000)\n"
            "    return 1.0"),
        # 5. a result that crashes the caller
        "deep_forged_result": (
            "import os, sys\n"
            "    os.write(int(sys.argv[1]), b'{\"ok\": true, \"kind\": \"ok\", \"value\": '"
            " + b'[' * 200000 + b']' * 200000 + b'}\\n')\n"
            "    return 1.0"),
        "deep_returned_value": (
            "v = 1.0\n    for _ in range(100000):\n        v = [v]\n    return v"),
        # beyond the five
        "subinterpreter": (
            "import _xxsubinterpreters as si\n"
            "    i = si.create()\n"
            f"    si.run_string(i, \"open('{caller}/{tok}-subint', 'w').write('x')\")\n"
            "    return 1.0"),
        "patch_posixpath": (
            "import os, posixpath\n"
            "    here = os.getcwd()\n"
            "    posixpath._joinrealpath = lambda *a: (here, True)\n"
            f"    return 1.0 if {tok!r} in open({home + '/canary.txt'!r}).read() else 0.0"),
        "rewrite_hook_via_traceback": (
            "import os\n"
            "    try:\n"
            f"        open({home + '/canary.txt'!r})\n"
            "    except Exception as e:\n"
            "        tb = e.__traceback__\n"
            "        while tb.tb_next:\n"
            "            tb = tb.tb_next\n"
            "        here = os.getcwd()\n"
            "        tb.tb_frame.f_locals['_resolve'].__code__ = (lambda *a: here).__code__\n"
            f"    return 1.0 if {tok!r} in open({home + '/canary.txt'!r}).read() else 0.0"),
        "raise_memory_limit": (
            "import resource\n"
            "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)\n"
            "    return 1.0 if len(bytearray(1 << 30)) else 0.0"),
        # switching the hook's path checks off from inside: empty every dict, list and set the
        # runner's module holds, or the hook's frame on a refusal's traceback holds (the hook
        # read its link/rename/remove allowances from such a dict), then make a link in the
        # caller's folder; without namespaces the hook is what refuses link, rename and unlink
        "clear_hook_state_via_main": (
            "import os, sys\n"
            "    for v in list(vars(sys.modules['__main__']).values()):\n"
            "        if type(v) in (dict, list, set):\n"
            "            v.clear()\n"
            f"    os.symlink('module.py', {caller + '/' + tok + '-link-main'!r})\n"
            "    return 1.0"),
        "clear_hook_state_via_traceback": (
            "import os\n"
            "    try:\n"
            f"        os.symlink('module.py', {caller + '/' + tok + '-refused'!r})\n"
            "    except Exception as e:\n"
            "        tb = e.__traceback__\n"
            "        while tb.tb_next:\n"
            "            tb = tb.tb_next\n"
            "        for v in list(tb.tb_frame.f_locals.values()):\n"
            "            if type(v) in (dict, list, set):\n"
            "                v.clear()\n"
            f"    os.symlink('module.py', {caller + '/' + tok + '-link-tb'!r})\n"
            "    return 1.0"),
    }


def module_source(body: str, gym: str = "toy") -> str:
    return (f"APPLIES_TO = [{gym!r}]\n\ndef attack():\n    " + body +
            "\n\ndef turn_reward(turn):\n    return float(attack())\n")


LIMITS = sandbox.Limits(wall_s=10.0, cpu_s=10.0, memory_mb=512)


def episode() -> dict:
    return {"gym": "toy", "task_id": "t", "turns": [
        {"turn": 1, "agent": "what is it?", "user": "42", "env_reward": 0.0}]}


# ---- the OS walls on their own, and the hook on its own ------------------------------------

def _run_every_attack(t: dict, limits: sandbox.Limits) -> dict[str, sandbox.SandboxResult]:
    return {name: sandbox.run_function(module_source(body), "attack", [], limits)
            for name, body in attacks(t).items()}


@needs_namespaces
def test_namespaces_and_seccomp_alone_contain_every_attack(targets):
    """The audit hook switched off: what holds is the mount, PID, IPC and network namespaces,
    the seccomp filter and the rlimits."""
    results = _run_every_attack(targets, sandbox.Limits(10.0, 10.0, 512, audit_hook=False))
    assert {n: r.value for n, r in results.items() if r.ok and r.value == 1.0} == {}
    assert traces(targets) == []
    kinds = {n: r.kind for n, r in results.items()}
    # the seccomp filter kills: process creation, FIFOs and device nodes
    for name in ("spawn_private_entry", "fifo_in_tmp", "fifo_in_caller", "device_in_caller"):
        assert kinds[name] == "forbidden" and "seccomp" in results[name].error, (name, results[name])
    # the private /dev/shm holds 64 MiB: memory outside RLIMIT_AS, bounded, gone with the call
    assert "No space left" in results["shared_memory_beyond_limits"].error
    assert kinds["deep_forged_result"] == "forbidden" and "malformed" in results["deep_forged_result"].error
    assert kinds["deep_returned_value"] == "output_limit"


@needs_namespaces
def test_the_childs_folder_is_bounded_memory_not_the_hosts_disk(tmp_path):
    """Found beyond the five: the child's folder was a host folder, and files of RLIMIT_FSIZE
    each, written within the CPU limit, could fill the host's disk. Now it is a 64 MiB tmpfs
    over the host folder's path, holding the module and the runner read-only."""
    folder = tmp_path / "box"
    folder.mkdir()
    body = ("for i in range(128):\n        with open(f'f{i}', 'wb') as f:\n"
            "            f.write(b'x' * 1_000_000)\n    return 1.0")
    res = sandbox.run_function(module_source(body), "attack", [], LIMITS, workdir=str(folder))
    assert res.kind == "exception" and "No space left" in res.error
    assert sorted(p.name for p in folder.iterdir()) == ["_runner.py", "module.py"]
    res = sandbox.run_function(module_source("open('module.py', 'a').write('x')\n    return 1.0"),
                               "attack", [], LIMITS, workdir=str(folder))
    assert "Read-only file system" in res.error


@needs_seccomp
def test_without_namespaces_seccomp_and_the_hook_contain_every_attack(targets, monkeypatch, capsys):
    """Where the kernel refuses namespaces (bwrap made unavailable here): the sandbox says so
    once, loudly, and the seccomp filter and the audit hook still hold every class."""
    monkeypatch.setattr(isolation_mod, "_STATE", None)
    monkeypatch.setattr(isolation_mod.shutil, "which", lambda name: None)
    iso = sandbox.isolation()
    assert iso.bwrap is None and iso.seccomp is not None
    err = capsys.readouterr().err
    assert err.count("EAU sandbox: WARNING") == 1 and "bubblewrap" in err
    results = _run_every_attack(targets, LIMITS)
    assert capsys.readouterr().err == ""          # once per process
    assert {n: (r.kind, r.error) for n, r in results.items() if r.ok} == {}
    assert traces(targets) == []


# ---- where untrusted code runs: trainer, gate, pre-commit hook, ColBench --------------------

@needs_os_walls
def test_trainer_reward_scoring_contains_every_attack(targets):
    folder = Path(targets["caller"]).parent / "rewards"
    folder.mkdir()
    files = {}
    for name, body in attacks(targets).items():
        files[name] = folder / f"{name}.py"
        files[name].write_text(module_source(body))
    files["fair"] = folder / "fair.py"
    files["fair"].write_text("APPLIES_TO = ['toy']\n\ndef turn_reward(turn):\n    return 0.5\n")
    knobs = json.loads(json.dumps(KNOBS))
    knobs["reward"]["turn_reward_clip"] = {"min": -10.0, "max": 10.0}
    knobs["reward"]["modules"] = {n: {"enabled": True, "weight": 1.0} for n in files}
    modules = rewards.load_modules(files, knobs)
    try:
        for _ in range(2):                        # dead workers restart and stay contained
            stats = rewards.ScoreStats()
            ep = episode()
            assert rewards.score_episode(ep, modules, knobs, stats) == [0.5]
            parts = ep["turns"][0]["module_rewards"]
            assert {n: v for n, v in parts.items() if n != "fair"} == {n: 0.0 for n in files if n != "fair"}
            assert stats.errors == len(files) - 1 and stats.calls == len(files)
    finally:
        rewards.close_all(modules)
    assert traces(targets) == []


@needs_os_walls
def test_a_trainer_step_goes_on_with_every_class(targets, tmp_path, tiny_model_dir):
    ws = write_workspace(tmp_path / "ws")
    chosen = {k: v for k, v in attacks(targets).items() if k in (
        "spawn_private_entry", "dir_fd_write_venv", "device_in_caller", "posix_shared_memory",
        "deep_forged_result")}                    # one per class of the five
    (ws / "rewards").mkdir()
    for name, body in chosen.items():
        (ws / "rewards" / f"{name}.py").write_text(module_source(body))
    knobs = json.loads(json.dumps(KNOBS))
    knobs["reward"]["modules"] = {n: {"enabled": True, "weight": 1.0} for n in chosen}
    (ws / "knobs.json").write_text(json.dumps(knobs))
    run = tmp_path / "run"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir, overrides={
        "trainer.total_steps": 1, "rollout.response_length": 4, "rollout.max_turns": 2})
    from training.trainer import Trainer

    assert Trainer(run).run() == 0
    row = list(metrics.read_lines(run / "metrics.jsonl"))[-1]
    assert row["step"] == 1 and row["reward/module_errors"] == row["reward/module_calls"] > 0
    assert all(row[f"reward/module/{n}"] == 0.0 for n in chosen)
    assert traces(targets) == []


@needs_os_walls
def test_gate_replay_rejects_every_attack_and_judges_the_next_commit(targets, tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    from orchestrator import gate, ledger

    for name, body in attacks(targets).items():
        write(ws, {"rewards/hostile.py": module_source(body, "travel")})
        set_knob(ws, "reward.modules.hostile", {"enabled": True, "weight": 1.0})
        sha = commit(ws, f"add {name}")
        verdicts = gate.judge_pending(exp, ws)
        assert [(v.commit, v.verdict) for v in verdicts] == [(sha, "rejected")], (name, verdicts)
        assert verdicts[0].reasons[0].startswith("rewards/hostile.py"), verdicts[0].reasons
        assert ws.tree_of(ws.main()) == ws.tree_of(ws.rev("refs/eau/live"))    # reverted
    write(ws, {"rewards/hostile.py": "APPLIES_TO = ['travel']\ndef turn_reward(t):\n    return 0.1\n"})
    sha = commit(ws, "a fair module")
    assert [v.verdict for v in gate.judge_pending(exp, ws)] == ["accepted"]
    assert ws.rev("refs/eau/live") == sha
    lines = ledger.read_lines(exp, "verdict")
    assert [r["verdict"] for r in lines][-len(attacks(targets)) - 1:] == \
        ["rejected"] * len(attacks(targets)) + ["accepted"]
    assert traces(targets) == []


@needs_os_walls
def test_pre_commit_hook_refuses_a_crashing_result_in_one_sentence(targets, tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    head = ws.main()
    write(ws, {"rewards/hostile.py": module_source(attacks(targets)["deep_forged_result"], "travel")})
    set_knob(ws, "reward.modules.hostile", {"enabled": True, "weight": 1.0})
    ws.run("add", "-A")
    env = {**os.environ, "GIT_AUTHOR_NAME": PERSON[0], "GIT_AUTHOR_EMAIL": PERSON[1],
           "GIT_COMMITTER_NAME": PERSON[0], "GIT_COMMITTER_EMAIL": PERSON[1]}
    proc = subprocess.run(["git", "commit", "-m", "deep" + WHY], cwd=ws.path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and ws.main() == head
    assert "Traceback" not in proc.stderr and "EAU gate: commit refused:" in proc.stderr
    assert "rewards/hostile.py" in proc.stderr and "malformed result" in proc.stderr
    assert traces(targets) == []


REF = "def double(x):\n    return x * 2\n"
TASK = Task(id="t-double", gym="colbench", split="test", prompt="Write double(x).",
            data={"ground_truth": REF, "func": "double",
                  "test_cases": {"t1": "double(1)", "t2": "double(2)", "t3": "double(5)"}})


@needs_os_walls
def test_colbench_answers_score_zero_for_every_attack(targets):
    cache = ReferenceCache()
    for name, body in attacks(targets).items():
        answer = ("def attack():\n    " + body + "\n\ndef double(x):\n"
                  "    return x * 2 * attack()\n")   # right only if the attack got out
        s = score_answer(TASK, "```python\n" + answer + "```", cache=cache)
        assert (s.pass_rate, s.success, s.passed, s.counted) == (0.0, False, 0, 3), (name, s)
    assert traces(targets) == []


# ---- the gate and its hooks never wedge, whatever goes wrong in a check ----------------------

FAIR = "APPLIES_TO = ['travel']\ndef turn_reward(t):\n    return 0.1\n"


def _broken_check(*args, **kwargs):
    raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")


def test_an_error_judging_a_commit_rejects_it_and_the_next_commit_is_judged(tmp_path, monkeypatch):
    from orchestrator import gate, gate_checks, ledger

    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    monkeypatch.setattr(gate_checks, "check_reward_module", _broken_check)
    write(ws, {"rewards/m.py": FAIR})
    broken = commit(ws, "a module whose check raises")
    set_knob(ws, "env.travel.max_steps", 20)
    after = commit(ws, "a knob after it")
    verdicts = gate.judge_pending(exp, ws)            # returns: the gate did not crash
    assert [(v.commit, v.verdict) for v in verdicts] == [(broken, "rejected"), (after, "accepted")]
    reason = verdicts[0].reasons[0]
    assert reason.startswith(f"commit {broken[:10]}: the gate could not judge it (RecursionError:")
    assert json.loads(ws.note(broken))["verdict"] == "rejected"
    assert verdicts[0].reverted_by is not None           # reverted on main like any refusal
    assert "rewards/m.py" not in ws.run("ls-tree", "-r", "--name-only", ws.main())
    assert [r["commit"] for r in ledger.read_lines(exp, "verdict")][-2:] == [broken, after]
    assert gate.judge_pending(exp, ws) == []         # nothing left pending: not wedged


def test_hooks_refuse_in_one_sentence_when_a_check_raises(tmp_path, monkeypatch, capsys):
    from orchestrator import gate, gate_checks

    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    monkeypatch.setattr(gate_checks, "check_reward_module", _broken_check)
    write(ws, {"rewards/m.py": FAIR})
    ws.run("add", "-A")
    monkeypatch.chdir(ws.path)
    assert gate.hook_main("pre-commit", str(exp), None) == 1
    err = capsys.readouterr().err
    assert err.startswith("EAU gate: commit refused:\n  - commit (staged): the gate could not judge "
                          "it (RecursionError: maximum recursion depth")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2
    # post-commit: judging raises, the commit exists already; a sentence, exit 0 (git ignores it)
    monkeypatch.setattr(gate, "judge_pending", _broken_check)
    assert gate.hook_main("post-commit", str(exp), None) == 0
    err = capsys.readouterr().err
    assert "could not judge the new commit now (RecursionError" in err and "Traceback" not in err
