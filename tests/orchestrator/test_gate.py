"""The write gate on real temporary git repositories (DESIGN.md, "The experiment workspace")."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from gate_testkit import AGENT, PERSON, WHY, commit, knob_commit, knobs, make_experiment, set_knob, write, \
    write_metrics, ws_of
from orchestrator import gate, ledger
from orchestrator.workspace import LIVE_REF


@pytest.fixture
def exp(tmp_path):
    return make_experiment(tmp_path)


def judge_one(exp):
    verdicts = gate.judge_pending(exp)
    assert len(verdicts) == 1
    return verdicts[0]


def assert_reverted(exp, v):
    """The rejected commit is reverted on main by a commit naming it, and main's tree == live's."""
    ws = ws_of(exp)
    assert v.verdict == "rejected" and v.reverted_by == ws.main()
    message = ws.info(ws.main()).message
    assert v.commit in message and v.reasons[0].split(":")[0] in message
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF)
    assert ws.run("status", "--porcelain") == ""          # the checkout followed main


def test_valid_knob_change_is_accepted_and_live_moves(exp):
    ws = ws_of(exp)
    sha = knob_commit(ws, "agent.entropy_coeff", 0.004)
    v = judge_one(exp)
    assert (v.commit, v.verdict, v.reasons) == (sha, "accepted", [])
    assert v.knob_changes == [{"path": "agent.entropy_coeff", "old": 0.001, "new": 0.004}]
    assert ws.rev(LIVE_REF) == sha
    assert json.loads(ws.note(sha))["verdict"] == "accepted"
    assert ledger.read_lines(exp, "verdict")[-1]["commit"] == sha
    assert gate.judge_pending(exp) == []                  # judged once


@pytest.mark.parametrize("dotted,value,expected", [
    ("env.travel.max_steps", 100, ["env.travel.max_steps", "100", "maximum of 60"]),
    ("user.travel.match_threshold", -0.5, ["user.travel.match_threshold", "-0.5", "minimum of 0"]),
    ("agent.entropy_coeff", 0.01, ["agent.entropy_coeff", "0.001 -> 0.01", "x-max-delta 0.004"]),
    ("env.travel.bogus_knob", 3, ["env.travel", "bogus_knob", "not allowed"]),
    ("reward.turn_reward_clip", {"min": 1.0, "max": 0.5}, ["turn_reward_clip.min 1.0 is above", "max 0.5"]),
    ("user.travel.withhold_kinds", ["shape"], ["withhold_kinds", "'shape'", "no travel task"]),
    ("env.colbench.max_steps", 12, ["env.colbench.max_steps", "usergym experiment"]),
])
def test_invalid_knob_writes_are_refused_and_reverted(exp, dotted, value, expected):
    ws = ws_of(exp)
    live = ws.rev(LIVE_REF)
    knob_commit(ws, dotted, value)
    v = judge_one(exp)
    text = " ".join(v.reasons)
    assert all(e in text for e in expected), text
    assert ws.rev(LIVE_REF) == live
    assert_reverted(exp, v)


def test_harder_write_needs_recent_success(exp):
    ws = ws_of(exp)
    knob_commit(ws, "env.travel.max_steps", 12)                    # fewer turns: harder
    v = judge_one(exp)
    assert "no metrics exist yet" in v.reasons[0] and "0.80" in v.reasons[0]

    # success 0.9 long ago, 0.5 over the last 10 steps: the mean of the last W=10 decides
    rows = [{"step": i, "success/travel": 0.9} for i in range(20)] + \
           [{"step": 20 + i, "success/travel": 0.5} for i in range(10)]
    path = write_metrics(exp, rows)
    knob_commit(ws, "env.travel.max_steps", 12)
    v = judge_one(exp)
    assert "0.500" in v.reasons[0] and "below the limit 0.80" in v.reasons[0]

    with path.open("a") as f:                                      # a torn line is skipped
        f.write('{"step": 30, "success/tra\n')
        f.write("".join(json.dumps({"step": 31 + i, "success/travel": 0.85}) + "\n" for i in range(10)))
    knob_commit(ws, "env.travel.max_steps", 12)
    with pytest.warns(UserWarning, match="skipped"):
        v = judge_one(exp)
    assert v.accepted, v.reasons
    knob_commit(ws, "env.travel.max_steps", 20)                    # easier: no success needed
    assert judge_one(exp).accepted


def test_files_outside_the_workspace_are_refused(exp):
    ws = ws_of(exp)
    write(ws, {"training/trainer.py": "print('patched')\n"})
    os.symlink("/etc/passwd", ws.path / "notes.md")
    commit(ws)
    v = judge_one(exp)
    text = " ".join(v.reasons)
    assert "training/trainer.py: outside the workspace" in text
    assert "notes.md: a symbolic link (to '/etc/passwd')" in text
    assert_reverted(exp, v)
    assert not (ws.path / "training").exists()


def _widen(ws):
    schema = json.loads((ws.path / "schema/knobs.schema.json").read_text())
    schema["properties"]["env"]["properties"]["travel"]["properties"]["max_steps"]["maximum"] = 100
    write(ws, {"schema/knobs.schema.json": json.dumps(schema, indent=2)})


@pytest.mark.parametrize("identity,body,accepted", [
    (PERSON, WHY, False),                                           # no Eau-Author: human
    (PERSON, WHY + "Eau-Author: human\n", True),
    (AGENT, WHY + "Eau-Author: human\n", False),                    # agent email
    (PERSON, WHY + "Eau-Author: human\nEau-Agent: codex\n", False),  # agent trailer
])
def test_schema_widening_needs_a_human(exp, identity, body, accepted):
    ws = ws_of(exp)
    _widen(ws)
    commit(ws, "widen max_steps", body=body, identity=identity)
    v = judge_one(exp)
    assert v.accepted == accepted, v.reasons
    if not accepted:
        assert "maximum 60 -> 100" in v.reasons[0] and "Eau-Author: human" in v.reasons[0]
        assert_reverted(exp, v)


def test_missing_rationale_is_refused(exp):
    ws = ws_of(exp)
    set_knob(ws, "agent.kl_loss_coef", 0.002)
    commit(ws, "tweak kl", body="\n\nWhy: drifting.\n")
    v = judge_one(exp)
    assert len(v.reasons) == 1 and "no `Expect:` line" in v.reasons[0]


GOOD_MODULE = "APPLIES_TO = ['travel']\n\ndef turn_reward(turn):\n    return 0.1 * len(turn['revealed_facts'])\n"
BAD_MODULES = {
    "raises": ("APPLIES_TO = ['travel']\ndef turn_reward(turn):\n    return turn['missing_key']\n",
               "turn_reward failed: KeyError"),
    "loops": ("APPLIES_TO = ['travel']\ndef turn_reward(turn):\n    while True:\n        pass\n",
              "did not return within"),
    "nan": ("APPLIES_TO = ['travel']\ndef episode_reward(ep):\n    return float('nan')\n",
            "episode_reward returned nan, not a finite float"),
    "imports": ("import no_such_package\nAPPLIES_TO = ['travel']\ndef turn_reward(t):\n    return 0.0\n",
                "No module named 'no_such_package'"),
    "no_applies": ("def turn_reward(t):\n    return 0.0\n", "defines no APPLIES_TO"),
}


@pytest.mark.parametrize("kind", sorted(BAD_MODULES))
def test_bad_reward_modules_are_refused(exp, kind):
    ws = ws_of(exp)
    source, expected = BAD_MODULES[kind]
    write(ws, {"rewards/shaping.py": source})
    set_knob(ws, "reward.modules.shaping", {"enabled": True, "weight": 1.0})
    commit(ws, f"add a {kind} module")
    v = judge_one(exp)
    assert any(expected in r and r.startswith("rewards/shaping.py") for r in v.reasons), v.reasons
    assert_reverted(exp, v)


def test_good_reward_module_replays_recent_trajectories(exp):
    ws = ws_of(exp)
    traj = exp / "run-001" / "trajectories" / "step-000010.jsonl"
    traj.parent.mkdir(parents=True)
    turn = {"turn": 1, "agent": "[action] budget?", "user": "100", "reward": 0.0,
            "revealed_facts": "f1", "leaked_facts": [], "asked_question": True, "answered": False,
            "rule_id": None, "tool_calls": []}
    traj.write_text(json.dumps({"gym": "travel", "task_id": "t1", "user_arm": "llm", "turns": [turn],
                                "score": 0.0, "success": False}) + "\n")
    write(ws, {"rewards/shaping.py": GOOD_MODULE.replace("len(turn['revealed_facts'])",
                                                         "sum(turn['revealed_facts'])")})
    commit(ws, "module that breaks on the real turn shape")
    v = judge_one(exp)                     # synthetic turns hold lists; the replayed one a string
    assert "TypeError" in " ".join(v.reasons)
    write(ws, {"rewards/shaping.py": GOOD_MODULE})
    commit(ws, "module that works")
    assert judge_one(exp).accepted


def test_rule_with_bad_regex_is_refused(exp):
    ws = ws_of(exp)
    rules = json.loads((ws.path / "users/usergym/rules.json").read_text())
    rules["rules"].insert(0, {"id": "greedy", "when": {"regex": "(budget"}, "reveal": "none", "say": "Hm."})
    write(ws, {"users/usergym/rules.json": json.dumps(rules)})
    commit(ws, "add a rule")
    v = judge_one(exp)
    assert "users/usergym/rules.json" in v.reasons[0] and "(budget" in v.reasons[0], v.reasons
    assert_reverted(exp, v)


@pytest.mark.parametrize("control,ok", [
    ({"action": "restart", "why": "entropy collapsed"}, True),
    ({"action": "resume", "why": "crash"}, False),                     # no checkpoint named
    ({"action": "rewind", "why": "x"}, False),
])
def test_control_requests_are_validated(exp, control, ok):
    ws = ws_of(exp)
    write(ws, {"control.json": json.dumps(control)})
    commit(ws, "control")
    assert judge_one(exp).accepted == ok


def test_pre_commit_hook_refuses_before_the_commit_exists(exp):
    ws = ws_of(exp)
    head = ws.main()
    set_knob(ws, "env.travel.max_steps", 100)
    ws.run("add", "-A")
    env = {**os.environ, "GIT_AUTHOR_NAME": PERSON[0], "GIT_AUTHOR_EMAIL": PERSON[1],
           "GIT_COMMITTER_NAME": PERSON[0], "GIT_COMMITTER_EMAIL": PERSON[1]}
    proc = subprocess.run(["git", "commit", "-m", "bigger" + WHY], cwd=ws.path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "env.travel.max_steps" in proc.stderr
    assert ws.main() == head                                         # nothing was committed
    set_knob(ws, "env.travel.max_steps", 20)
    ws.run("add", "-A")
    proc = subprocess.run(["git", "commit", "-m", "no rationale"], cwd=ws.path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "no `Why:` line" in proc.stderr and ws.main() == head
    proc = subprocess.run(["git", "commit", "-m", "more turns" + WHY], cwd=ws.path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # nothing runs the experiment: the post-commit hook judged it (test_post_commit_... below)
    assert gate.judged_verdict(ws, ws.main())["verdict"] == "accepted"


def test_burst_of_ten_commits_by_two_writers_is_judged_in_order(exp):
    ws = ws_of(exp)
    made, bad = [], {2, 5, 8}
    for i in range(10):
        who = PERSON if i % 2 else ("codex", "codex@agents.eau")
        if i in bad:
            set_knob(ws, "env.travel.max_steps", 99)                   # out of range
        else:
            set_knob(ws, f"reward.per_gym_scale.{['travel', 'tau', 'persuade'][i % 3]}", 1.0 + (i + 1) / 100)
        body = WHY + ("Eau-Agent: codex\nEau-Session: s1\n" if who[1].endswith("agents.eau") else "")
        made.append(commit(ws, f"write {i}", body=body, identity=who))
        if i in bad:
            set_knob(ws, "env.travel.max_steps", 16)                   # the writer's next commit fixes it
    verdicts = gate.judge_pending(exp)
    assert [v.commit for v in verdicts] == made
    assert [i for i, v in enumerate(verdicts) if not v.accepted] == sorted(bad)
    assert {v.author_kind for v in verdicts} == {"agent", "person"}
    assert [r["commit"] for r in ledger.read_lines(exp, "verdict")][-10:] == made
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF)
    k = knobs(ws)
    assert k["env"]["travel"]["max_steps"] == 16
    assert k["reward"]["per_gym_scale"] == {**k["reward"]["per_gym_scale"], "travel": 1.1, "tau": 1.08,
                                            "persuade": 1.0}
    assert gate.judge_pending(exp) == []


def test_history_rewrite_is_refused(exp):
    ws = ws_of(exp)
    knob_commit(ws, "agent.entropy_coeff", 0.002)
    assert judge_one(exp).accepted
    set_knob(ws, "agent.entropy_coeff", 0.003)
    ws.run("-c", "core.hooksPath=/dev/null", "commit", "-q", "-a", "--amend", "-m", "amended" + WHY)
    v = judge_one(exp)
    assert "history rewrite" in v.reasons[0]
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF)
    assert knobs(ws)["agent"]["entropy_coeff"] == 0.002


def _within(seconds: int, fn):
    """fn() or TimeoutError after `seconds`: Python's re checks for signals while it backtracks,
    so SIGALRM ends a runaway match (a bound, not a measurement: the match below takes 2^40 steps
    under Python's re and microseconds under RE2)."""
    def on_alarm(*_):
        raise TimeoutError(f"still matching after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_rule_regex_fast_where_the_gate_looks_and_exponential_elsewhere_cannot_stall(exp):
    """`(x+x+)+y` finishes at once on every message the gate replays or invents (none holds a
    long run of x's), so the gate accepts it; a policy message of 40 x's would then take about
    2^40 backtracking steps under Python's re. Rule conditions run on RE2, linear in the message."""
    from training.benches.base import Fact, Task, UserState
    from training.users.symbolic import SymbolicUser, compile_rules

    ws = ws_of(exp)
    rules = json.loads((ws.path / "users/usergym/rules.json").read_text())
    rules["rules"].insert(0, {"id": "xy", "when": {"regex": "(x+x+)+y"}, "reveal": "none", "say": "Hm."})
    write(ws, {"users/usergym/rules.json": json.dumps(rules)})
    commit(ws, "a rule the gate's strings never stress")
    assert judge_one(exp).accepted
    live = json.loads(ws.read_file(LIVE_REF, "users/usergym/rules.json"))
    task = Task(id="t", gym="travel", split="train", prompt="Book a hotel.",
                facts=(Fact("budget", "preference", "My budget is 200.", ("budget",)),))
    kinds = {k for rule in live["rules"] for k in rule.get("kinds", [])} | {"preference"}
    user = SymbolicUser(compile_rules(live, kinds))
    state = UserState(gym="travel", task=task, turn=1, agent_message="x" * 40,
                      history=[], revealed={}, questions_asked=0,
                      knobs={"facts_per_reply": 1, "match_threshold": 0.5, "volunteer_interval": 0,
                             "max_reveals": 8, "withhold_kinds": []}, extra={"act": "action"})
    reply = _within(20, lambda: user.respond(state))
    assert reply.rule_id != "xy"                     # no y: the condition does not hold


@pytest.mark.parametrize("regex,what", [(r"(ask)\1", "a backreference"),
                                        ("(?P<w>ask)(?P=w)", "a backreference"),
                                        ("budget(?= please)", "a lookahead"),
                                        ("(?<!no )budget", "a negative lookbehind")])
def test_rule_regex_syntax_re2_lacks_is_refused_in_one_sentence(exp, regex, what):
    ws = ws_of(exp)
    rules = json.loads((ws.path / "users/usergym/rules.json").read_text())
    rules["rules"].insert(0, {"id": "re2", "when": {"regex": regex}, "reveal": "none", "say": "Hm."})
    write(ws, {"users/usergym/rules.json": json.dumps(rules)})
    commit(ws, "a rule in Perl syntax")
    v = judge_one(exp)
    assert not v.accepted and len(v.reasons) == 1, v.reasons
    reason = v.reasons[0]
    assert reason.startswith("users/usergym/rules.json: rules[0].when.regex = ") and repr(regex) in reason
    assert f"it uses {what}, which RE2 lacks" in reason and reason.endswith("without it.")
    assert reason.count(". ") == 0                   # one sentence
    assert_reverted(exp, v)


def test_knob_without_effect_on_the_bench_is_refused(tmp_path):
    exp = make_experiment(tmp_path, "cb", bench="ColBench")
    ws = ws_of(exp)
    knob_commit(ws, "reward.predicate_weight", 0.2)          # function only (paper table 8, note a)
    v = judge_one(exp)
    assert "predicate_weight has effect only on function" in v.reasons[0], v.reasons
    knob_commit(ws, "user.colbench.match_threshold", 0.4)     # easier: accepted without metrics
    assert judge_one(exp).accepted


def test_withhold_kinds_are_checked_against_the_real_bench_tasks(tmp_path):
    from orchestrator.experiment_init import init_experiment
    exp = init_experiment("cb2", "colbench", tmp_path / "runs")     # no cached kinds: asks the bench
    write_metrics(exp, [{"step": i, "success/colbench": 0.9} for i in range(10)])
    ws = ws_of(exp)
    knob_commit(ws, "user.colbench.withhold_kinds", ["shape"])
    v = judge_one(exp)
    assert v.accepted, v.reasons
    knob_commit(ws, "user.colbench.withhold_kinds", ["shape", "colour"])
    v = judge_one(exp)
    assert "names fact kind 'colour', which no colbench task has" in v.reasons[0], v.reasons
    assert json.loads((exp / ".gate-cache" / "fact_kinds-colbench-shipped.json").read_text())["colbench"]


def test_withhold_kinds_are_checked_against_the_runs_own_data_folder(tmp_path):
    """A run on `--data-dir` tasks is judged by their fact kinds, not the shipped tasks' ones."""
    from orchestrator.experiment_init import init_experiment
    from training.benches.colbench.data import DATA_DIR
    first = json.loads((DATA_DIR / "train.jsonl").read_text().splitlines()[0])
    first["hidden_facts"][0]["kind"] = "colour"              # a kind no shipped task has
    data = tmp_path / "colbench-data"
    data.mkdir()
    (data / "train.jsonl").write_text(json.dumps(first) + "\n")
    exp = init_experiment("cb3", "colbench", tmp_path / "runs")
    write_metrics(exp, [{"step": i, "success/colbench": 0.9} for i in range(10)])
    (exp / "run-001" / "config.json").write_text(json.dumps({"data": {"data_dir": str(data)},
                                                             "rollout": {"max_turns": 6}}))
    ws = ws_of(exp)
    knob_commit(ws, "user.colbench.withhold_kinds", ["colour"])
    v = judge_one(exp)
    assert v.accepted, v.reasons
    knob_commit(ws, "user.colbench.withhold_kinds", ["colour", "shape"])
    v = judge_one(exp)
    assert "names fact kind 'shape', which no colbench task has" in v.reasons[0], v.reasons


def test_withholding_telepathys_stated_category_is_refused(tmp_path):
    """The shipped telepathy tasks state their category ("I am thinking of a fruit") and hide
    none; the user confirms a stated fact whatever withhold_kinds says, so withholding the category
    would change no reply: refused, naming the kinds that can be withheld."""
    from orchestrator.experiment_init import init_experiment
    exp = init_experiment("ug", "usergym", tmp_path / "runs")       # no cached kinds: asks the bench
    write_metrics(exp, [{"step": i, "success/telepathy": 0.9} for i in range(10)])
    ws = ws_of(exp)
    knob_commit(ws, "user.telepathy.withhold_kinds", ["category"])
    v = judge_one(exp)
    assert "names fact kind 'category', which no telepathy task has as a hidden fact (kinds: attribute)" \
        in v.reasons[0], v.reasons
    knob_commit(ws, "user.telepathy.withhold_kinds", ["attribute"])
    v = judge_one(exp)
    assert v.accepted, v.reasons


def test_rules_are_replayed_on_recent_transcripts(exp, monkeypatch):
    from orchestrator.rule_replay import replay
    from training.benches import get_bench
    task = next(t for t in get_bench("usergym").load_tasks("train") if t.gym == "travel")
    ep = {"gym": "travel", "task_id": task.id, "user_arm": "symbolic", "score": 0, "success": False,
          "turns": [{"turn": 1, "agent": "[action] What do you prefer?", "asked_question": True},
                    {"turn": 2, "agent": "[answer] Option 1", "asked_question": False}]}
    rules = json.loads((ws_of(exp).path / "users/usergym/rules.json").read_text())
    out = replay("usergym", rules, {"travel": {"match_threshold": 0.0, "max_reveals": 8}}, [ep])
    assert out["errors"] == [] and out["turns"] == 2 and sum(out["fired"].values()) == 2
    out = replay("usergym", rules, {"travel": {"withhold_kinds": ["no-such-kind"]}}, [ep])
    assert "UnknownFactKind" in out["errors"][0] and task.id in out["errors"][0]

    traj = exp / "run-001" / "trajectories" / "step-000001.jsonl"      # the gate replays them
    traj.parent.mkdir(parents=True)
    traj.write_text(json.dumps(ep) + "\n")
    ws = ws_of(exp)
    rules["rules"].insert(0, {"id": "greet", "when": {"regex": "hello"}, "reveal": "none", "say": "Hi."})
    write(ws, {"users/usergym/rules.json": json.dumps(rules)})
    commit(ws, "greet back")
    v = judge_one(exp)
    assert v.accepted, v.reasons
    import orchestrator.rule_replay as rr                              # the gate refuses on failures
    monkeypatch.setattr(rr, "replay", lambda *a: {"errors": ["turn 1 of task t: KeyError: 'x'"]})
    rules["rules"][0]["say"] = "Hello."
    write(ws, {"users/usergym/rules.json": json.dumps(rules)})
    commit(ws, "greet differently")
    v = judge_one(exp)
    assert "replayed on recent transcripts, the symbolic user failed at turn 1 of task t" in v.reasons[0]


def _git_commit(ws, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": PERSON[0], "GIT_AUTHOR_EMAIL": PERSON[1],
           "GIT_COMMITTER_NAME": PERSON[0], "GIT_COMMITTER_EMAIL": PERSON[1]}
    env.pop("EAU_SESSION", None)
    return subprocess.run(["git", "commit", "-a", *args], cwd=ws.path, env=env, capture_output=True,
                          text=True)


def test_post_commit_hook_judges_a_persons_commit_when_nothing_runs(exp):
    """Between runs a person's commit used to pass the hooks and wait, unjudged, for
    `orchestrator gate`; now it is judged as it lands: accepted is live, rejected is reverted."""
    ws = ws_of(exp)
    set_knob(ws, "agent.entropy_coeff", 0.003)
    proc = _git_commit(ws, "-m", "more entropy" + WHY)
    assert proc.returncode == 0 and f"EAU gate: accepted {ws.main()[:10]}: it is live" in proc.stderr
    assert ws.rev(LIVE_REF) == ws.main()
    assert ledger.read_lines(exp, "verdict")[-1]["commit"] == ws.main()
    set_knob(ws, "env.travel.max_steps", 99)                        # over the schema's maximum
    proc = _git_commit(ws, "--no-verify", "-m", "far too many turns" + WHY)
    bad = ws.info(ws.main()).parent
    assert f"EAU gate: rejected {bad[:10]} and reverted it on main" in proc.stderr
    assert "env.travel.max_steps" in proc.stderr
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF) and knobs(ws)["env"]["travel"]["max_steps"] == 16
    assert ws.run("status", "--porcelain") == ""                    # the checkout followed main
    assert gate.judge_pending(exp) == []


def test_a_hook_refusal_says_how_to_back_out_and_that_command_does(exp):
    """git stops the refused commit, not the edit: the change stays staged and in the files.
    The hook names the command that drops it, the README gives the same, and it works."""
    import re

    from orchestrator.paths import project_root

    ws = ws_of(exp)
    head = ws.main()
    set_knob(ws, "env.travel.max_steps", 99)                        # over the schema's maximum
    write(ws, {"rewards/notes.md": "a new file in the same commit\n"})
    ws.run("add", "-A")
    proc = _git_commit(ws, "-m", "far too many turns" + WHY)
    assert proc.returncode != 0 and ws.main() == head
    assert "EAU gate: commit refused:" in proc.stderr
    command = re.search(r"back out with `([^`]+)`", proc.stderr).group(1)
    assert command == "git restore --source=HEAD --staged --worktree -- knobs.json rewards/notes.md"
    readme = (project_root() / "README.md").read_text()
    assert "git restore --source=HEAD --staged --worktree -- FILE" in readme
    subprocess.run(command, shell=True, cwd=ws.path, check=True)
    assert ws.run("status", "--porcelain") == "" and knobs(ws)["env"]["travel"]["max_steps"] == 16


def test_post_commit_hook_leaves_a_running_experiment_to_its_watcher(exp):
    meta = json.loads((exp / "experiment.json").read_text())
    (exp / "experiment.json").write_text(json.dumps({**meta, "state": "running", "pid": os.getpid()}))
    ws = ws_of(exp)
    live = ws.rev(LIVE_REF)
    set_knob(ws, "agent.entropy_coeff", 0.003)
    proc = _git_commit(ws, "-m", "more entropy" + WHY)
    assert proc.returncode == 0 and "EAU gate" not in proc.stderr
    assert ws.rev(LIVE_REF) == live and gate.judged_verdict(ws, ws.main()) is None
    assert judge_one(exp).accepted


def test_plain_git_log_shows_verdicts_also_in_an_older_experiment(exp):
    ws = ws_of(exp)
    sha = knob_commit(ws, "agent.entropy_coeff", 0.003)
    judge_one(exp)
    assert '"verdict": "accepted"' in ws.run("log", "-1", sha)     # no --notes=eau needed
    # an experiment made before the post-commit hook and notes.displayRef existed
    ws.run("config", "--unset-all", "notes.displayRef")
    (ws.git_dir / "hooks" / "post-commit").unlink()
    assert '"verdict"' not in ws.run("log", "-1", sha)
    ws = gate.open_experiment_workspace(exp)                       # the orchestrator opens it
    assert '"verdict": "accepted"' in ws.run("log", "-1", sha)
    assert (ws.git_dir / "hooks" / "post-commit").exists()


def test_the_builtin_agents_reward_sources_pass_the_gate(exp):
    """The module the built-in agent writes (eau_progress) and the guard it appends to a farmed
    module replay cleanly on the gate's turns, new_facts and repeated included."""
    from orchestrator.agents.builtin import GUARD_MARK, GUARD_SOURCE, PROGRESS_SOURCE

    ws = ws_of(exp)
    guarded = (ws.path / "rewards" / "elicited_fact.py").read_text().rstrip() + "\n" + \
        GUARD_SOURCE.format(mark=GUARD_MARK, why="a test")
    write(ws, {"rewards/elicited_fact.py": guarded,
               "rewards/eau_progress.py": PROGRESS_SOURCE.format(gyms=["travel", "tau"])})
    set_knob(ws, "reward.modules.eau_progress", {"enabled": True, "weight": 0.5})
    commit(ws, "guard and progress", identity=AGENT)
    v = judge_one(exp)
    assert v.accepted, v.reasons


def test_max_steps_past_the_runs_turn_cap_is_refused_with_the_reason(exp):
    """The rollout ends every episode at the run's rollout.max_turns: raising an environment's
    max_steps past it would change nothing, so the gate says so instead of accepting it."""
    ws = ws_of(exp)
    (exp / "run-001").mkdir(exist_ok=True)
    (exp / "run-001" / "config.json").write_text(json.dumps({"rollout": {"max_turns": 18}}))
    knob_commit(ws, "env.travel.max_steps", 18)           # the shipped 16, up to the cap
    assert judge_one(exp).accepted
    knob_commit(ws, "env.travel.max_steps", 20)
    v = judge_one(exp)
    assert not v.accepted and "changes nothing: run-001's rollout.max_turns 18" in v.reasons[0]
    assert knobs(ws)["env"]["travel"]["max_steps"] == 18   # reverted


def test_user_llm_knob_names_a_user_the_run_defines(exp):
    ws = ws_of(exp)
    (exp / "run-001").mkdir(exist_ok=True)
    (exp / "run-001" / "config.json").write_text(json.dumps({"rollout": {
        "max_turns": 16, "user_llm": "none",
        "user_llms": {"served": {"kind": "http", "base_url": "http://127.0.0.1:1/v1", "model": "m"}}}}))
    knob_commit(ws, "user.travel.llm", "served")
    assert judge_one(exp).accepted
    knob_commit(ws, "user.travel.llm", "gpt-4o-mini")
    v = judge_one(exp)
    assert not v.accepted and "names LLM user 'gpt-4o-mini', which run-001's config does not define" in v.reasons[0]


def _recent_function_turns(exp, n=4):
    """n guessing function episodes (no disclosure) in the run's newest trajectories."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
    from episodes import function_guess, write_steps

    write_steps(exp / "run-001", {3: [function_guess() for _ in range(n)],
                                  4: [function_guess() for _ in range(n)]})


def test_a_module_expected_to_move_a_gym_where_its_replay_pays_nothing_is_refused(exp):
    """The CPU demo's step-8 commit: eau_progress (first disclosures) with Expect naming
    score/function, while no recent function turn had a disclosure: refused, with the count."""
    from orchestrator.agents.builtin import PROGRESS_SOURCE

    ws = ws_of(exp)
    _recent_function_turns(exp)
    write(ws, {"rewards/eau_progress.py": PROGRESS_SOURCE.format(gyms=["function", "travel"])})
    set_knob(ws, "reward.modules.eau_progress", {"enabled": True, "weight": 0.5})
    commit(ws, "progress for function", "\n\nWhy: success 0.\nExpect: score/function rises.\n", AGENT)
    v = judge_one(exp)
    assert v.reasons == ["rewards/eau_progress.py: replayed on the 8 recent function turns it pays "
                         "nothing, yet the Expect line names function: nothing it pays on happened "
                         "there lately."]
    assert_reverted(exp, v)
    # the same module expected to move travel, which had no recent turns to say, is accepted
    write(ws, {"rewards/eau_progress.py": PROGRESS_SOURCE.format(gyms=["function", "travel"])})
    set_knob(ws, "reward.modules.eau_progress", {"enabled": True, "weight": 0.5})
    commit(ws, "progress for travel", "\n\nWhy: success 0.\nExpect: score/travel rises.\n", AGENT)
    assert judge_one(exp).accepted


def test_an_expect_line_naming_the_share_taking_a_step_names_its_gym():
    """The built-in agent's Expect for a missing step, `took/<gym>/<step> rises, then
    score/<gym>.`: the gym after took/ is the one a module must pay in, for the gate as for the
    agent's own replay."""
    from orchestrator.agents.remedies import Intervention, target_gyms
    from orchestrator.gate_replay import expected_gyms

    assert expected_gyms("x\n\nWhy: y\nExpect: took/function/probe rises.\n",
                         ("function", "travel")) == ["function"]
    act = Intervention("x", "y", "took/travel/search rises.")
    assert target_gyms(act, ["function", "travel"]) == ["travel"]


def test_the_builtin_agents_step_rewards_and_worked_examples_pass_the_gate(exp):
    """A step reward and the invented worked examples (the TauGym one put first) are accepted."""
    from orchestrator.agents.remedies import STEP_EXAMPLES, STEP_SOURCE

    ws = ws_of(exp)
    demos = json.loads((ws.path / "demonstrations/usergym.json").read_text())
    demos["tau"].insert(0, STEP_EXAMPLES[("tau", "identify")])
    demos["travel"].insert(0, STEP_EXAMPLES[("travel", "search")])
    write(ws, {"demonstrations/usergym.json": json.dumps(demos, indent=2),
               "rewards/eau_step_tau_identify.py": STEP_SOURCE.format(
                   gym="tau", step="identify", what="find_user_id_by_name_zip", pay=0.1)})
    set_knob(ws, "reward.modules.eau_step_tau_identify", {"enabled": True, "weight": 1.0})
    commit(ws, "step reward and examples", identity=AGENT)
    v = judge_one(exp)
    assert v.accepted, v.reasons
