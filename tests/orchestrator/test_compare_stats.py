"""Bootstrap intervals, paired differences and the per-gym table of `orchestrator compare`
(orchestrator/compare_stats.py), on synthetic per-task results whose answer is known."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compare_testkit import bernoulli, seed_entry
from orchestrator import compare_stats as cs
from orchestrator.compare import CompareSpec, add_aggregates, agent_twins, render_markdown


def _seeds(entries):
    return {str(i): e for i, e in enumerate(entries)}


def test_identical_methods_give_a_paired_interval_holding_zero():
    rng = np.random.default_rng(0)
    a = _seeds([bernoulli(rng, {"travel": 0.3, "turtle": 0.6}) for _ in range(3)])
    same = cs.paired_difference(a, a, "success")
    assert same["diff"] == same["lo"] == same["hi"] == 0.0
    # two methods of equal skill, drawn apart: a difference within the noise
    b = _seeds([bernoulli(rng, {"travel": 0.3, "turtle": 0.6}) for _ in range(3)])
    d = cs.paired_difference(a, b, "success")
    assert d["lo"] < 0 < d["hi"] and cs.outside_noise(d) == 0
    assert (d["tasks"], d["seeds"]) == (60, 3)


def test_a_constant_shift_gives_an_interval_around_the_shift():
    rng = np.random.default_rng(1)
    keys = [f"{g}/t{i}" for g in ("travel", "turtle") for i in range(30)]
    a = _seeds([seed_entry({k: 0.0 for k in keys}, {k: rng.uniform(0, 0.8) for k in keys})
                for _ in range(3)])
    b = _seeds([seed_entry({k: 0.0 for k in keys}, {k: v["score"] + 0.1 for k, v in s["tasks"].items()})
                for s in a.values()])
    d = cs.paired_difference(b, a, "score")
    assert d["diff"] == pytest.approx(0.1) and d["lo"] == pytest.approx(0.1) and d["hi"] == pytest.approx(0.1)
    # the same shift under per-task noise: the interval is around it and excludes 0
    noisy = _seeds([seed_entry({k: 0.0 for k in keys},
                               {k: v["score"] + 0.1 + rng.normal(0, 0.05) for k, v in s["tasks"].items()})
                    for s in a.values()])
    d = cs.paired_difference(noisy, a, "score")
    assert d["lo"] < 0.1 < d["hi"] and d["lo"] > 0.08 and d["hi"] < 0.12
    assert cs.outside_noise(d) == 1 and cs.outside_noise(cs.paired_difference(a, noisy, "score")) == -1


def test_one_methods_interval_has_the_width_of_a_binomial_mean():
    """400 tasks of one gym, one seed, success 0.3: the interval is near 0.3 +- 1.96 sqrt(pq/n)."""
    rng = np.random.default_rng(2)
    s = cs.interval({"0": bernoulli(rng, {"travel": 0.3}, tasks=400)}, "success")
    half = 1.96 * np.sqrt(0.3 * 0.7 / 400)
    assert s["lo"] < s["mean"] < s["hi"] and abs(s["mean"] - 0.3) < 0.06
    assert (s["hi"] - s["lo"]) == pytest.approx(2 * half, rel=0.15)
    assert (s["tasks"], s["seeds"]) == (400, 1)


def test_the_spread_between_runs_widens_the_interval():
    """Three runs whose success differs (0.1, 0.5, 0.9 on every task) give a far wider interval
    than three runs alike with the same mean: seeds are resampled, not only tasks."""
    keys = [f"travel/t{i}" for i in range(40)]
    apart = _seeds([seed_entry({k: float(i % 10 < 10 * p) for i, k in enumerate(keys)})
                    for p in (0.1, 0.5, 0.9)])
    alike = _seeds([seed_entry({k: float(i % 10 < 5) for i, k in enumerate(keys)}) for _ in range(3)])
    wide, narrow = cs.interval(apart, "success"), cs.interval(alike, "success")
    assert wide["mean"] == pytest.approx(0.5) and narrow["mean"] == pytest.approx(0.5)
    assert wide["hi"] - wide["lo"] > 2 * (narrow["hi"] - narrow["lo"])


def test_intervals_are_reproducible_and_the_overall_mean_weighs_gyms_alike():
    rng = np.random.default_rng(3)
    keys = [f"travel/t{i}" for i in range(10)] + [f"turtle/t{i}" for i in range(90)]
    seeds = _seeds([seed_entry({k: 0.0 for k in keys},
                               {k: rng.uniform() if k.startswith("travel") else 1.0 for k in keys})
                    for _ in range(2)])
    assert cs.interval(seeds, "score") == cs.interval(seeds, "score")
    assert cs.interval(seeds, "score", seed=1) != cs.interval(seeds, "score")
    travel = np.mean([r["score"] for s in seeds.values() for k, r in s["tasks"].items()
                      if k.startswith("travel")])
    # travel's 10 tasks weigh as much as turtle's 90, as in the tables' overall rows
    assert cs.interval(seeds, "score")["mean"] == pytest.approx((travel + 1.0) / 2)


def test_pairs_count_only_the_tasks_and_seeds_both_methods_have():
    a = _seeds([seed_entry({"travel/t0": 1, "travel/t1": 1, "travel/t2": 0}) for _ in range(3)])
    b = _seeds([seed_entry({"travel/t0": 0, "travel/t1": 1}) for _ in range(2)]
               + [{"missing": "its training failed"}])
    d = cs.paired_difference(a, b, "success")
    assert (d["tasks"], d["seeds"]) == (2, 2) and d["diff"] == pytest.approx(0.5)
    assert d["relative"] == pytest.approx(1.0) and d["base"] == pytest.approx(0.5)


def test_pairs_put_each_agent_against_its_algorithm_then_everything_against_prompting():
    twins = agent_twins()
    assert twins["eau"] == "ppo" and twins["grpo-eau"] == "grpo" and twins["infopo-eau-codex"] == "infopo"
    assert cs.method_pairs(["prompting", "ppo", "eau", "grpo"], twins) == [
        ("eau", "ppo"), ("ppo", "prompting"), ("eau", "prompting"), ("grpo", "prompting")]
    assert cs.method_pairs(["ppo", "grpo-eau"], twins) == []


def test_task_rows_keep_each_episodes_outcome_turns_and_refusals(tmp_path):
    episodes = tmp_path / "episodes.jsonl"
    turn = {"agent": "x", "invalid_action": False, "env_reward": 0.5}
    episodes.write_text("\n".join(json.dumps(r) for r in [
        {"gym": "travel", "task_id": "a", "success": True, "score": 0.75,
         "turns": [turn, {**turn, "invalid_action": True, "env_reward": 0.0},
                   {**turn, "rejected": "search", "env_reward": 0.0}, {**turn, "env_reward": 1.25}]},
        {"gym": "turtle", "task_id": "a", "success": False, "score": 0.0, "turns": []}]) + "\n")
    assert cs.task_rows(episodes) == {
        "travel/a": {"success": 1.0, "score": 0.75, "env_reward": 1.75, "turns": 4, "refused": 1,
                     "rejected": 1, "family": "travel/a"},
        "turtle/a": {"success": 0.0, "score": 0.0, "env_reward": 0.0, "turns": 0, "refused": 0,
                     "rejected": 0, "family": "turtle/a"}}


def _learning_results():
    """PPO learns travel (0.2 -> 0.9 on every task), not turtle; EAU like PPO."""
    rng = np.random.default_rng(4)
    def method(travel, turns, refused):
        return {"seeds": _seeds([bernoulli(rng, {"travel": travel, "turtle": 0.3}, turns=turns,
                                           refused=refused) for _ in range(3)])}
    return {"bench": "usergym", "jobs": [], "trained_gyms": ["travel"], "held_out_gyms": ["turtle"],
            "methods": {"prompting": method(0.2, 8, 6), "ppo": method(0.9, 4, 1),
                        "eau": method(0.9, 4, 1)}}


def test_the_per_gym_table_says_which_gyms_learn_with_turns_and_refusals():
    results = _learning_results()
    add_aggregates(results)
    gyms = results["stats"]["gyms"]
    assert cs.outside_noise(gyms["travel"]["ppo"]["vs_baseline"]) == 1
    assert cs.outside_noise(gyms["turtle"]["ppo"]["vs_baseline"]) == 0
    assert gyms["travel"]["prompting"]["turns"] == 8 and gyms["travel"]["prompting"]["refused"] == 0.75
    md = render_markdown(CompareSpec(name="t", bench="usergym", methods=("prompting", "ppo", "eau")),
                         results, "orchestrator compare ...")
    travel_ppo = next(line for line in md.splitlines() if line.startswith("| travel | ppo |"))
    # results kept before evaluations recorded rejected calls show none
    assert travel_ppo.endswith("| yes | 4.0 | 25% | - |")
    turtle_ppo = next(line for line in md.splitlines() if line.startswith("| turtle (held out) | ppo |"))
    assert "| no | 4.0 | 25% | - |" in turtle_ppo
    assert "| travel | prompting |" in md and md.count("| 8.0 | 75% |") == 2
    for s in results["methods"]["ppo"]["seeds"].values():
        for key, row in s["tasks"].items():
            row["rejected"] = 2 if key.startswith("travel/") else 0
    add_aggregates(results)
    assert results["stats"]["gyms"]["travel"]["ppo"]["rejected"] == 0.5
    md = render_markdown(CompareSpec(name="t", bench="usergym", methods=("prompting", "ppo", "eau")),
                         results, "orchestrator compare ...")
    assert next(line for line in md.splitlines()
                if line.startswith("| travel | ppo |")).endswith("| yes | 4.0 | 25% | 50% |")


def test_results_md_says_in_words_which_differences_are_outside_the_noise():
    results = _learning_results()
    add_aggregates(results)
    md = render_markdown(CompareSpec(name="t", bench="usergym", methods=("prompting", "ppo", "eau")),
                         results, "orchestrator compare ...")
    words = {line.split(":")[0]: line for line in md.splitlines() if line.startswith("- ")}
    assert "outside the noise, ppo above prompting" in words["- ppo − prompting"]
    assert "within the noise (the interval holds 0)" in words["- eau − ppo"]
    assert "Success differences outside the noise: ppo − prompting, eau − prompting." in md
    assert "## Uncertainty on the held-out split (the shipped test tasks)" in md
    assert "| eau − ppo |" in md and "tasks x seeds" in md


def test_results_without_per_task_records_say_there_are_no_intervals():
    results = {"bench": "usergym", "jobs": [], "trained_gyms": [], "held_out_gyms": [],
               "methods": {"ppo": {"seeds": {"0": {"per_gym": {"travel": {
                   "success": 0.5, "score": 0.5, "invalid_rate": 0.0}}}}}}}
    add_aggregates(results)
    md = render_markdown(CompareSpec(name="t", bench="usergym", methods=("ppo",)), results, "c")
    assert "No per-task records" in md


def test_the_trained_and_the_held_out_gyms_get_intervals_apart():
    results = _learning_results()
    add_aggregates(results)
    groups = results["stats"]["groups"]
    assert groups["trained"]["gyms"] == ["travel"] and groups["held_out"]["gyms"] == ["turtle"]
    ppo = {g: next(p["success"] for p in v["pairs"] if (p["a"], p["b"]) == ("ppo", "prompting"))
           for g, v in groups.items()}
    assert cs.outside_noise(ppo["trained"]) == 1 and cs.outside_noise(ppo["held_out"]) == 0
    assert groups["trained"]["methods"]["ppo"] == cs.interval(results["methods"]["ppo"]["seeds"],
                                                               "success", {"travel"})
    md = render_markdown(CompareSpec(name="t", bench="usergym", methods=("prompting", "ppo", "eau")),
                         results, "orchestrator compare ...")
    assert "| | trained gyms (travel) [95%] | held-out gyms (turtle) [95%] |" in md
    assert "On the held-out gyms, success differences outside the noise: none." in md


def test_a_group_names_only_the_gyms_its_evaluations_ran():
    """UserRL's test files run no travel: the trained group there is turtle's alone, and a group
    none of whose gyms ran is left out."""
    rng = np.random.default_rng(5)
    methods = {"ppo": {"seeds": _seeds([bernoulli(rng, {"turtle": 0.5, "intention": 0.5})])}}
    stats = cs.set_stats(methods, {}, {"trained": ["travel", "turtle"], "held_out": ["intention"],
                                       "other": ["tau"]})
    assert stats["groups"]["trained"]["gyms"] == ["turtle"]
    assert set(stats["groups"]) == {"trained", "held_out"}


def test_persuade_tasks_of_one_claim_are_one_family(tmp_path):
    """Persuade's tasks with one prompt (one claim) are one family; other gyms' tasks are their
    own, whatever their prompt (function's 30 held-out tasks share one prompt)."""
    episodes = tmp_path / "episodes.jsonl"
    rows = [{"gym": "persuade", "task_id": f"p{i}", "success": False, "score": 0.0, "turns": [],
             "prompt": "Persuade me: " + ("coding" if i < 2 else "museums")} for i in range(3)]
    rows += [{"gym": "function", "task_id": f"f{i}", "success": False, "score": 0.0, "turns": [],
              "prompt": "Guess the function."} for i in range(2)]
    episodes.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    fam = {k: r["family"] for k, r in cs.task_rows(episodes).items()}
    assert fam["persuade/p0"] == fam["persuade/p1"] != fam["persuade/p2"]
    assert fam["function/f0"] == "function/f0" and fam["function/f1"] == "function/f1"


def _family_seeds(families: list[str], outcomes: list[list[int]]):
    """Seeds of one gym's tasks t0.. with the given families, success per seed and task."""
    return _seeds([{"tasks": {f"persuade/t{i}": {"success": float(v), "score": float(v),
                                                "family": families[i]}
                              for i, v in enumerate(per_task)}} for per_task in outcomes])


def test_tasks_of_one_family_are_resampled_together():
    """30 tasks over 4 claims (the shipped held-out persuade split), all successes on one claim:
    drawn by claim, the interval is wider than drawn by task, and its point is the same. Rows
    without families (older results.json) keep the task bootstrap exactly."""
    claims = [f"c{i % 4}" for i in range(30)]
    outcome = [[1 if c == "c0" else 0 for c in claims]] * 2
    by_claim = cs.interval(_family_seeds(claims, outcome), "success")
    by_task = cs.interval(_family_seeds([f"t{i}" for i in range(30)], outcome), "success")
    old = _family_seeds([f"t{i}" for i in range(30)], outcome)
    for s in old.values():
        for r in s["tasks"].values():
            del r["family"]
    assert by_claim["mean"] == by_task["mean"] == pytest.approx(8 / 30)
    assert by_claim["families"] == 4 and by_task["families"] == 30 and by_claim["tasks"] == 30
    assert by_claim["hi"] - by_claim["lo"] > 2 * (by_task["hi"] - by_task["lo"])
    assert cs.interval(old, "success") == by_task
    # one claim lifted in a paired difference: outside the noise by task, inside it by claim
    zero = [[0] * 30] * 2
    by_claim_d = cs.paired_difference(_family_seeds(claims, outcome), _family_seeds(claims, zero), "success")
    tasks = [f"t{i}" for i in range(30)]
    by_task_d = cs.paired_difference(_family_seeds(tasks, outcome), _family_seeds(tasks, zero), "success")
    assert by_task_d["lo"] > 0 and by_claim_d["lo"] <= 0 < by_claim_d["hi"]
