"""`orchestrator compare` scaled down to the tiny model on the CPU: the same command as on the GPU
(prompting, PPO and EAU; two seeds; held-out evaluation of every final checkpoint), so the
comparison's machinery is tested where CI runs; the GPU run only changes the sizes."""
from __future__ import annotations

import json

import pytest

from orchestrator.cli import main


def _config(runs, exp):
    """A run's frozen config without its own workspace's path."""
    cfg = json.loads((runs / exp / "run-001" / "config.json").read_text())
    assert cfg.pop("workspace")["repo"] == str(runs / exp / "workspace")
    return cfg


@pytest.mark.slow          # ~1-2 minutes: four tiny training runs and six evaluations
def test_compare_trains_evaluates_and_tabulates_every_method_and_seed(tmp_path, tiny_model_dir, capsys):
    runs = tmp_path / "runs"
    argv = ["--runs-dir", str(runs), "compare", "--bench", "usergym", "--name", "cmp",
            "--methods", "prompting,ppo,eau", "--seeds", "2", "--steps", "2", "--preset", "cpu",
            "--model", str(tiny_model_dir), "--device", "cpu", "--parallel", "2",
            "--set", "gyms=[\"intention\",\"telepathy\"]", "--set", "data.train_batch_size=2",
            "--set", "rollout.n=1", "--set", "rollout.max_turns=2", "--set", "rollout.response_length=8",
            "--set", "trainer.save_freq=0", "--set", "model.precision=fp32",
            "--knob", "env.*.demonstrations=0",
            "--eval-episodes", "1", "--eval-max-turns", "2", "--eval-max-new-tokens", "4",
            "--user-llm", "none"]
    assert main(argv) == 0
    out = runs / "cmp"
    results = json.loads((out / "results.json").read_text())
    assert set(results["methods"]) == {"prompting", "ppo", "eau"}
    for method, entry in results["methods"].items():
        assert sorted(entry["seeds"]) == ["0", "1"], method
        assert all("per_gym" in s for s in entry["seeds"].values()), (method, entry["seeds"])
        agg = entry["aggregate"]
        assert agg["seeds"] == 2 and agg["overall"]["success"]["n"] == 2
        assert set(agg["gyms"]) == {"travel", "function", "persuade", "tau", "turtle", "intention",
                                    "telepathy"}                  # the held-out protocol's gyms
    # the same start for every method: configs differ only in the seed; knobs seeded alike
    ppo0, eau0, ppo1 = _config(runs, "cmp-ppo-s0"), _config(runs, "cmp-eau-s0"), _config(runs, "cmp-ppo-s1")
    assert ppo0 == eau0
    assert ppo0["trainer"]["seed"] == 0 and ppo1["trainer"]["seed"] == 1
    assert {k: v for k, v in ppo1.items() if k != "trainer"} == {k: v for k, v in ppo0.items() if k != "trainer"}
    for exp in ("cmp-ppo-s0", "cmp-eau-s1"):
        meta = json.loads((runs / exp / "experiment.json").read_text())
        assert meta["seed_knobs"] == {"env.*.demonstrations": 0}
    # every evaluation is the final checkpoint's (or the untrained model's), its deviations recorded
    summaries = [json.loads(f.read_text()) for f in runs.glob("cmp-*/eval/*/summary.json")]
    assert len(summaries) == 6
    assert {s["source"] for s in summaries} == {"checkpoint", "model"}
    assert all({d["setting"] for d in s["deviations"]} >= {"episodes"} for s in summaries)
    # trained on intention and telepathy here: the other five are the held-out group, apart
    assert results["trained_gyms"] == ["intention", "telepathy"]
    assert results["held_out_gyms"] == ["travel", "function", "persuade", "tau", "turtle"]
    assert set(results["methods"]["ppo"]["aggregate"]["groups"]) == {"trained", "held_out"}
    md = (out / "RESULTS.md").read_text()
    assert md.count("| **overall** |") == 4 and "| prompting | ppo | eau |" in md
    assert md.count("| **held-out gyms (travel, function, persuade, tau, turtle)** |") == 4
    # UserGym's headline is the environment's own reward, as the paper's table 1 prints it
    assert md.index("## environment reward") < md.index("## success") < md.index("## score")
    assert (out / "report" / "index.html").exists()
    assert "RESULTS.md" in capsys.readouterr().out


def test_compare_refuses_unknown_methods_in_one_sentence(tmp_path, capsys):
    assert main(["--runs-dir", str(tmp_path), "compare", "--bench", "usergym", "--methods", "ppo,reinforce"]) != 0
    err = capsys.readouterr().err
    assert "unknown method 'reinforce'" in err and len(err.strip().splitlines()) == 1
    assert main(["--runs-dir", str(tmp_path), "compare", "--bench", "usergym", "--methods", "grpo",
                 "--set", "algorithm.name=infopo"]) != 0
    err = capsys.readouterr().err
    assert "name the algorithm in the method" in err and len(err.strip().splitlines()) == 1


def test_table5_methods_train_their_algorithm_with_and_without_the_agent(tmp_path):
    """The paper's Table 5 rows from one command: each method's run gets its algorithm and its
    agent, and nothing else differs between the runs of a seed."""
    from orchestrator.compare import CompareSpec, train_jobs

    methods = ("ppo", "eau", "grpo", "grpo-eau", "infopo", "infopo-eau", "infopo-eau-codex")
    spec = CompareSpec(name="t5", bench="tau2", methods=("prompting", *methods), seeds=1,
                       sets=("algorithm.gamma=0.8",), runs_dir=tmp_path)
    jobs = {j.method: j.argv for j in train_jobs(spec, tmp_path / "logs")}
    assert sorted(jobs) == sorted(methods)                    # prompting trains nothing
    want = {"ppo": ("ppo", "none"), "eau": ("ppo", "builtin"), "grpo": ("grpo", "none"),
            "grpo-eau": ("grpo", "builtin"), "infopo": ("infopo", "none"),
            "infopo-eau": ("infopo", "builtin"), "infopo-eau-codex": ("infopo", "codex")}
    for method, argv in jobs.items():
        sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        algorithm, agent = want[method]
        assert argv[argv.index("--agent") + 1] == agent
        assert [s for s in sets if s.startswith("algorithm.name=")] == [f"algorithm.name={algorithm}"]
        assert "algorithm.gamma=0.8" in sets
        assert argv[argv.index("--exp") + 1] == f"t5-{method}-s0"
    strip = {m: [a for a in argv if not a.startswith(("algorithm.name=", "t5-"))
                 and a not in ("none", "builtin", "codex")] for m, argv in jobs.items()}
    assert len({tuple(v) for v in strip.values()}) == 1


def test_held_out_gyms_are_aggregated_apart_from_the_trained_ones():
    """Each group is the mean over its gyms within a seed, then mean and spread over seeds."""
    from orchestrator.compare import aggregate

    def gym(success):
        return {"success": success, "score": success, "invalid_rate": 0.0}
    seeds = {"0": {"per_gym": {"travel": gym(1.0), "intention": gym(0.0), "telepathy": gym(0.2)}},
             "1": {"per_gym": {"travel": gym(0.5), "intention": gym(0.4), "telepathy": gym(0.6)}},
             "2": {"missing": "its training failed"}}
    agg = aggregate(seeds, {"trained": ["travel"], "held_out": ["intention", "telepathy"]})
    assert agg["seeds"] == 2
    assert agg["groups"]["trained"]["success"]["mean"] == pytest.approx(0.75)
    assert agg["groups"]["held_out"]["success"]["mean"] == pytest.approx((0.1 + 0.5) / 2)
    assert agg["groups"]["held_out"]["success"]["sd"] == pytest.approx(0.2828427, abs=1e-6)
    assert agg["overall"]["success"]["mean"] == pytest.approx((0.4 + 0.5) / 2)


def test_each_spread_carries_its_number_of_seeds_and_one_seed_shows_none():
    """A cell of one seed reads "n=1", never "± 0.000" (a zero spread looked like a steady
    result); a cell of several shows its spread and how many seeds it is over."""
    from orchestrator.compare import CompareSpec, aggregate, render_markdown

    def seed(success):
        return {"per_gym": {"travel": {"success": success, "score": success, "invalid_rate": 0.0}}}
    spec = CompareSpec(name="n", bench="usergym", methods=("ppo", "eau"), seeds=3)
    results = {"jobs": [], "methods": {
        "ppo": {"aggregate": aggregate({"0": seed(0.5), "1": {"missing": "its training failed"},
                                        "2": {"missing": "its training failed"}})},
        "eau": {"aggregate": aggregate({"0": seed(0.2), "1": seed(0.4), "2": seed(0.6)})}}}
    md = render_markdown(spec, results, "orchestrator compare ...")
    assert "| travel | 0.500 (n=1) | 0.400 ± 0.200 (n=3) |" in md
    assert "| **overall** | 0.500 (n=1) | 0.400 ± 0.200 (n=3) |" in md
    # a real zero spread over three seeds (nothing refused in any) is still shown as one
    assert "| travel | 0.000 (n=1) | 0.000 ± 0.000 (n=3) |" in md


def test_results_say_which_worked_example_setting_the_tables_used():
    """RESULTS.md names the worked examples the evaluations showed: the paper's protocol shows
    none, ours one by default; a reader must not compare a 1-example table with the paper's."""
    from orchestrator.compare import CompareSpec, aggregate, render_markdown

    def seed(demos):
        return {"per_gym": {"travel": {"success": 0.0, "score": 0.1, "invalid_rate": 0.0}},
                "demonstrations": {"travel": demos}}
    spec = CompareSpec(name="d", bench="usergym", methods=("prompting",), seeds=1)
    for demos, expect in ((1, "Worked examples before each task: 1 (the paper's protocol shows "
                               "none (`--eval-demonstrations 0`))."),
                          (0, "Worked examples before each task: 0 (the paper's protocol).")):
        seeds = {"0": seed(demos)}
        results = {"jobs": [], "methods": {"prompting": {"seeds": seeds, "aggregate": aggregate(seeds)}}}
        assert expect in render_markdown(spec, results, "orchestrator compare ...")


def test_each_bench_shows_the_papers_number_first():
    """RESULTS.md opens with the number the paper's table prints for the bench: UserGym's
    environment reward (not the score normalised to [0, 1]), ColBench's Pass, tau2's success."""
    from orchestrator.compare import CompareSpec, aggregate, render_markdown

    seeds = {"0": {"per_gym": {"intention": {"success": 0.0, "score": 0.6, "env_reward": 1.7,
                                             "invalid_rate": 0.0}}}}
    results = {"jobs": [], "methods": {"ppo": {"seeds": seeds, "aggregate": aggregate(seeds)}}}
    sections = {bench: [line for line in render_markdown(CompareSpec(name="h", bench=bench,
                                                                     methods=("ppo",)),
                                                         results, "cmd").splitlines()
                        if line.startswith("## ") and line != "## Jobs"]
                for bench in ("usergym", "colbench", "tau2")}
    assert sections["usergym"][0].startswith("## environment reward (the paper's UserGym number")
    assert sections["colbench"][0].startswith("## score: Pass")
    assert sections["tau2"][0] == "## success (the paper's tau2 number)"
    assert not any("environment reward" in s for s in sections["colbench"] + sections["tau2"])
    md = render_markdown(CompareSpec(name="h", bench="usergym", methods=("ppo",)), results, "cmd")
    assert "| intention | 1.700 (n=1) |" in md


def test_generic_method_is_the_generic_meta_agent_between_runs(tmp_path):
    """`--methods generic` starts table 4's generic meta-agent: the built-in agent with the
    generic instruction (no EAU skill, the LLM user alone), its sessions between runs only."""
    from orchestrator.compare import CompareSpec, check_spec, train_jobs
    from orchestrator.errors import UserError

    spec = CompareSpec(name="g", bench="usergym", methods=("ppo", "generic", "generic-codex"),
                       seeds=1, max_runs=3, runs_dir=tmp_path)
    jobs = {j.method: j.argv for j in train_jobs(spec, tmp_path / "logs")}
    for method, agent in (("generic", "builtin"), ("generic-codex", "codex")):
        argv = jobs[method]
        assert argv[argv.index("--agent") + 1] == agent
        assert argv[argv.index("--skill") + 1] == "generic"
        assert argv[argv.index("--control") + 1] == "inter-run"
        assert argv[argv.index("--max-runs") + 1] == "3"
    assert "--skill" not in jobs["ppo"] and "--control" not in jobs["ppo"]
    with pytest.raises(UserError, match="trains against the LLM user alone"):
        check_spec(CompareSpec(name="g", bench="usergym", methods=("generic",),
                               user_mode="symbolic", runs_dir=tmp_path))


def test_a_method_at_a_user_mode_trains_against_that_user_and_pairs_against_the_llm_user(tmp_path):
    """`--methods eau@llm,eau@hybrid`: the paper's user table in one comparison, side by side.
    Each run gets its own experiment and `--user-mode`; the results pair eau@hybrid against
    eau@llm (and against ppo@hybrid where it ran); a mode where none applies, or beside
    --user-mode, is refused in one sentence."""
    from orchestrator.compare import (CompareSpec, add_aggregates, check_spec, eval_jobs,
                                      train_jobs)
    from orchestrator.errors import UserError

    spec = CompareSpec(name="um", bench="usergym", methods=("eau@llm", "eau@hybrid", "ppo@hybrid"),
                       seeds=1, runs_dir=tmp_path)
    check_spec(spec)
    jobs = {j.method: j for j in train_jobs(spec, tmp_path / "logs")}
    for m, exp, mode in (("eau@llm", "um-eau-llm-s0", "llm"), ("eau@hybrid", "um-eau-hybrid-s0", "hybrid"),
                         ("ppo@hybrid", "um-ppo-hybrid-s0", "hybrid")):
        argv = jobs[m].argv
        assert argv[argv.index("--exp") + 1] == exp and jobs[m].extra["exp"] == exp
        assert argv[argv.index("--user-mode") + 1] == mode
    assert jobs["eau@hybrid"].argv[jobs["eau@hybrid"].argv.index("--agent") + 1] == "builtin"
    assert jobs["ppo@hybrid"].argv[jobs["ppo@hybrid"].argv.index("--agent") + 1] == "none"
    assert {j.extra["exp"] for j in eval_jobs(spec, tmp_path / "logs")} == \
        {"um-eau-llm-s0", "um-eau-hybrid-s0", "um-ppo-hybrid-s0"}
    seeds = {"0": {"per_gym": {"travel": {"success": 1.0, "score": 1.0, "invalid_rate": 0.0}},
                   "tasks": {"travel/t1": {"success": 1.0, "score": 1.0}}}}
    results = {"methods": {m: {"seeds": seeds} for m in spec.methods},
               "trained_gyms": ["travel"], "held_out_gyms": []}
    add_aggregates(results)
    assert {(p["a"], p["b"]) for p in results["stats"]["pairs"]} == \
        {("eau@hybrid", "eau@llm"), ("eau@hybrid", "ppo@hybrid")}
    for methods, kw, said in ((("prompting@llm",), {}, "takes no @user mode"),
                              (("eau@mixed",), {}, "one of llm, symbolic, hybrid"),
                              (("eau@llm",), {"user_mode": "hybrid"}, "give one or the other"),
                              (("generic@hybrid",), {}, "trains against the LLM user alone")):
        with pytest.raises(UserError, match=said):
            check_spec(CompareSpec(name="x", bench="usergym", methods=methods, runs_dir=tmp_path, **kw))


@pytest.mark.slow          # ~1-2 minutes: one tiny run with its review, one evaluation
def test_compare_generic_runs_on_the_cpu_with_a_review_between_runs(tmp_path, tiny_model_dir):
    runs = tmp_path / "runs"
    argv = ["--runs-dir", str(runs), "compare", "--bench", "usergym", "--name", "gen",
            "--methods", "generic", "--seeds", "1", "--steps", "2", "--every", "1",
            "--max-runs", "2", "--preset", "cpu", "--model", str(tiny_model_dir),
            "--device", "cpu", "--set", "gyms=[\"intention\"]", "--set", "data.train_batch_size=1",
            "--set", "rollout.n=1", "--set", "rollout.max_turns=2",
            "--set", "rollout.response_length=8", "--set", "rollout.user_response_length=8",
            "--set", "trainer.save_freq=0", "--set", "model.precision=fp32",
            "--eval-episodes", "1", "--eval-max-turns", "2", "--eval-max-new-tokens", "4",
            "--user-llm", "none"]
    assert main(argv) == 0
    results = json.loads((runs / "gen" / "results.json").read_text())
    assert "per_gym" in results["methods"]["generic"]["seeds"]["0"]
    exp = runs / "gen-generic-s0"
    meta = json.loads((exp / "experiment.json").read_text())
    assert meta["generic_pinned"] and meta["user_mode"]["mode"] == "llm"
    assert json.loads((exp / "run-001" / "config.json").read_text())["rollout"]["user_llm"] == "reference"
    ledger = [json.loads(line) for line in (exp / "ledger.jsonl").read_text().splitlines()]
    sessions = [r for r in ledger if r["type"] == "session"]
    # --every 1 would have started a session after each step of an intra-run experiment; the
    # generic baseline reviews each finished run instead
    reviews = [r for r in ledger if r["type"] == "control" and r["action"] == "next"]
    assert len(sessions) == len(reviews) >= 1 and all(s["step"] == 2 for s in sessions)
    assert reviews[0]["run"] == "run-001"


def test_react_and_reflexion_are_prompting_rows_of_the_untrained_model(tmp_path):
    """Table 1's ReAct and Reflexion rows: the untrained model evaluated by the same walled
    protocol with that prompting, each into its own folder; nothing is trained for them."""
    from orchestrator.compare import CompareSpec, eval_jobs, train_jobs

    spec = CompareSpec(name="p", bench="usergym", methods=("prompting", "react", "reflexion", "ppo"),
                       seeds=1, eval_args=("--episodes", "1"), runs_dir=tmp_path)
    assert [j.method for j in train_jobs(spec, tmp_path)] == ["ppo"]
    jobs = {j.method: j.argv for j in eval_jobs(spec, tmp_path)}
    for method in ("react", "reflexion"):
        argv = jobs[method]
        assert argv[argv.index("eval") + 1] == str(tmp_path / f"p-{method}")
        assert argv[argv.index("--prompting") + 1] == method and "--model" in argv
        assert argv[-2:] == ["--episodes", "1"]
    assert "--prompting" not in jobs["prompting"] and "--prompting" not in jobs["ppo"]


def test_eval_data_dir_evaluates_every_method_and_the_untrained_model_on_the_original_files(tmp_path):
    """Training reads the shipped tasks (no data.data_dir); each evaluation runs once on the
    shipped test split and once on the original files, prompting's too though not asked for."""
    from dataclasses import replace

    from orchestrator.compare import CompareSpec, data_eval_jobs, eval_jobs, train_jobs

    folder = tmp_path / "userrl"
    spec = CompareSpec(name="d", bench="usergym", methods=("ppo", "eau"), seeds=2,
                       eval_args=("--episodes", "1"), runs_dir=tmp_path, eval_data_dir=folder)
    logs = tmp_path / "logs"
    for job in train_jobs(spec, logs):
        assert "--data-dir" not in job.argv and not any(a.startswith("data.data_dir") for a in job.argv)
    plain, data = eval_jobs(spec, logs), data_eval_jobs(spec, logs)
    assert not any("--data-dir" in j.argv for j in plain)
    assert sorted((j.method, j.seed) for j in data) == [
        ("eau", 0), ("eau", 1), ("ppo", 0), ("ppo", 1), ("prompting", 0), ("prompting", 1)]
    for job in data:
        assert job.kind == "eval-data" and job.argv[job.argv.index("--data-dir") + 1] == str(folder)
        assert job.argv[job.argv.index("--episodes") + 1] == "1"
        assert job.log.name.startswith("data-eval-")
    assert {j.log for j in data}.isdisjoint({j.log for j in plain})
    assert data_eval_jobs(CompareSpec(name="d", bench="usergym", runs_dir=tmp_path), logs) == []
    # --no-untrained: a later session's methods alone, the untrained model's taken from another
    # session at merge; prompting named among the methods is still evaluated
    alone = data_eval_jobs(replace(spec, untrained_data_eval=False), logs)
    assert sorted((j.method, j.seed) for j in alone) == [("eau", 0), ("eau", 1), ("ppo", 0), ("ppo", 1)]
    named = data_eval_jobs(replace(spec, methods=("prompting", "ppo"), untrained_data_eval=False), logs)
    assert sorted({j.method for j in named}) == ["ppo", "prompting"]


def test_no_untrained_without_eval_data_dir_is_refused_in_one_sentence(tmp_path, capsys):
    """The flag only means something beside --eval-data-dir; alone it would be silently ignored."""
    rc = main(["--runs-dir", str(tmp_path), "compare", "--bench", "usergym", "--methods",
               "grpo,grpo-eau", "--no-untrained"])
    err = capsys.readouterr().err
    assert rc != 0 and "--no-untrained" in err and "--eval-data-dir" in err
    assert not any(tmp_path.iterdir())


def _fake_eval(exp_dir, name, seed, data, success):
    """An evaluation folder as training/evaluate.py writes it: summary.json and episodes.jsonl."""
    folder = exp_dir / "eval" / name
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({
        "seed": seed, "data": data, "split": "test", "source": "checkpoint", "step": 2,
        "user_llm": "none", "user_protocol": "offline", "deviations": [],
        "per_gym": {"travel": {"success": success, "score": success, "invalid_rate": 0.0}}}))
    (folder / "episodes.jsonl").write_text(json.dumps({
        "gym": "travel", "task_id": f"{data}-t0", "success": bool(success), "score": success,
        "turns": [{"invalid_action": False}]}) + "\n")


def test_collect_keeps_the_held_out_split_and_the_original_files_apart(tmp_path):
    import time

    from orchestrator.compare import CompareSpec, Job, collect

    folder = str(tmp_path / "userrl")
    spec = CompareSpec(name="d", bench="usergym", methods=("ppo",), seeds=1, runs_dir=tmp_path,
                       eval_data_dir=tmp_path / "userrl")
    started = time.time()
    _fake_eval(tmp_path / "d-ppo-s0", "shipped", 0, "shipped", 1.0)
    _fake_eval(tmp_path / "d-ppo-s0", "files", 0, folder, 0.0)
    jobs = [Job("eval", "ppo", 0, ["eval"], tmp_path / "a.log", rc=0, extra={"exp": "d-ppo-s0"}),
            Job("eval-data", "ppo", 0, ["eval", "--data-dir", folder], tmp_path / "b.log", rc=0,
                extra={"exp": "d-ppo-s0"})]
    results = collect(spec, jobs, started)
    held, files = results["methods"]["ppo"]["seeds"]["0"], results["data_files"]["methods"]["ppo"]["seeds"]["0"]
    assert held["tasks"] == {"travel/shipped-t0": {"success": 1.0, "score": 1.0, "env_reward": 0.0,
                                                    "turns": 1, "refused": 0, "rejected": 0,
                                                    "family": "travel/shipped-t0"}}
    assert list(files["tasks"]) == [f"travel/{folder}-t0"] and files["per_gym"]["travel"]["success"] == 0.0
    assert held["protocol"]["data"] == "shipped" and files["protocol"]["data"] == folder
    assert results["data_files"]["folder"] == folder and results["data"] == "shipped"
    assert results["stats"]["methods"]["ppo"]["success"]["mean"] == 1.0
    assert results["data_files"]["stats"]["methods"]["ppo"]["success"]["mean"] == 0.0


def test_first_seed_gives_a_session_other_seeds(tmp_path):
    from orchestrator.compare import CompareSpec, check_spec, eval_jobs, train_jobs

    spec = CompareSpec(name="s", bench="usergym", methods=("prompting", "ppo"), seeds=2,
                       first_seed=3, runs_dir=tmp_path)
    train = train_jobs(spec, tmp_path)
    assert [j.extra["exp"] for j in train] == ["s-ppo-s3", "s-ppo-s4"]
    assert [j.argv[j.argv.index("--set") + 1] for j in train] == ["trainer.seed=3", "trainer.seed=4"]
    assert sorted({j.argv[j.argv.index("--seed") + 1] for j in eval_jobs(spec, tmp_path)}) == ["3", "4"]
    (tmp_path / "s-ppo-s3").mkdir()
    (tmp_path / "s-ppo-s3" / "experiment.json").write_text("{}")
    with pytest.raises(Exception, match="s-ppo-s3 exists"):
        check_spec(spec)


def test_eval_data_dir_refusals_are_one_sentence(tmp_path, capsys):
    base = ["--runs-dir", str(tmp_path), "compare", "--bench", "usergym"]
    assert main(base + ["--eval-data-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "--eval-data-dir" in err and "is not a folder" in err and len(err.strip().splitlines()) == 1
    assert main(base + ["--eval-data-dir", str(tmp_path), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--data-dir already trains and evaluates" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow          # ~1 minute: one tiny training run, four evaluations
def test_compare_evaluates_on_the_shipped_split_and_userrls_test_files(tmp_path, tiny_model_dir,
                                                                        benchdata):
    runs = tmp_path / "runs"
    argv = ["--runs-dir", str(runs), "compare", "--bench", "usergym", "--name", "cmpd",
            "--methods", "ppo", "--seeds", "1", "--steps", "1", "--preset", "cpu",
            "--model", str(tiny_model_dir), "--device", "cpu",
            "--set", "gyms=[\"intention\",\"telepathy\"]", "--set", "data.train_batch_size=2",
            "--set", "rollout.n=1", "--set", "rollout.max_turns=2", "--set", "rollout.response_length=8",
            "--set", "trainer.save_freq=0", "--set", "model.precision=fp32",
            "--eval-episodes", "1", "--eval-max-turns", "2", "--eval-max-new-tokens", "4",
            "--user-llm", "none", "--eval-data-dir", str(benchdata / "userrl")]
    assert main(argv) == 0
    results = json.loads((runs / "cmpd" / "results.json").read_text())
    assert not _config(runs, "cmpd-ppo-s0")["data"].get("data_dir")      # trained on the shipped tasks
    held, files = results["methods"], results["data_files"]["methods"]
    assert set(held) == {"ppo"} and set(files) == {"prompting", "ppo"}     # the untrained model too
    shipped_keys = set(held["ppo"]["seeds"]["0"]["tasks"])
    for method in files:
        keys = set(files[method]["seeds"]["0"]["tasks"])
        assert keys and all("/userrl-" in k for k in keys) and not keys & shipped_keys
        # UserRL ships no databases for travel and tau: left out, as `eval --data-dir` does
        assert not {k.split("/")[0] for k in keys} & {"travel", "tau"}
    md = (runs / "cmpd" / "RESULTS.md").read_text()
    assert "## Uncertainty on the held-out split (the shipped test tasks)" in md
    assert f"## The original test files ({benchdata / 'userrl'}), reported apart" in md
    files_md = md.split("## The original test files")[1]
    assert "| ppo − prompting |" in files_md and "Gyms left out: tau (" in files_md


def test_a_comparison_of_runs_that_decoded_stale_weights_says_so_above_its_tables(tmp_path):
    """Every GPU comparison up to 2026-12-06 trained on the initial policy's rollouts: a training
    run whose rollouts missed the update before them is named above RESULTS.md's tables."""
    import sys as _sys
    from pathlib import Path as _Path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1] / "fakes"))
    from runlogs import write_run

    from orchestrator.compare import stale_lines, stale_rollouts

    write_run(tmp_path / "cmp-ppo-s0" / "run-001", 6, metric_fn=lambda s, r: {
        "actor/updates": 1, "rollout/weights_copied": 1 if s == 1 else 0})
    write_run(tmp_path / "cmp-eau-s0" / "run-001", 6, metric_fn=lambda s, r: {
        "actor/updates": 1, "rollout/weights_copied": 1})
    write_run(tmp_path / "cmp-ppo-s1" / "run-001", 6, metric_fn=lambda s, r: {"actor/updates": 1})  # a CPU run
    stale = stale_rollouts(tmp_path, ["cmp-ppo-s0", "cmp-eau-s0", "cmp-ppo-s1"])
    assert stale == {"cmp-ppo-s0": [2, 3, 4, 5, 6]}
    text = "\n".join(stale_lines({"stale_rollouts": stale}))
    assert "**Stale rollouts.** In 1 training run(s)" in text and "cmp-ppo-s0: 5 step(s), first 2" in text
    assert stale_lines({"stale_rollouts": {}}) == [] and stale_lines({}) == []
