"""The shipped tasks (counts, schema, fact kinds, reproducible from the seed) and the loader of
UserRL's real files (every real task loads; the runnable ones run)."""
from __future__ import annotations

import collections
import json

import pytest

from training.benches.usergym import BENCH, MODULES, UnknownGym
from training.benches.usergym.common import ACTS, DATA_DIR, task_to_json
from training.benches.usergym.generate import build
from training.users.symbolic import UnknownFactKind, check_kinds
from usergym_helpers import snapshot


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_each_gym_ships_enough_tasks_with_declared_fact_kinds(gym):
    train, test = BENCH.load_tasks("train", [gym]), BENCH.load_tasks("test", [gym])
    assert len(train) >= 100 and len(test) >= 30
    ids = [t.id for t in train + test]
    assert len(set(ids)) == len(ids)
    kinds = {f.kind for t in train + test for f in t.facts}
    # telepathy's prompt names the category ("I am thinking of a fruit"): no shipped task hides it
    # (UserRL's files carry a category fact)
    assert kinds == set(MODULES[gym].FACT_KINDS) - ({"category"} if gym == "telepathy" else set())
    assert all(t.gym == gym and t.prompt and t.facts for t in train + test)
    check_kinds(sorted(kinds), train)


@pytest.mark.parametrize("gym", ["intention", "function"])
def test_shipped_files_are_what_the_seeded_generator_writes(gym):
    for split, tasks in build(gym, seed=0).items():
        lines = (DATA_DIR / gym / f"{split}.jsonl").read_text().splitlines()
        assert lines == [json.dumps(task_to_json(t), sort_keys=True) for t in tasks]


def test_persuade_test_claims_are_unseen_in_training():
    claims = lambda split: {t.data["claim"] for t in BENCH.load_tasks(split, ["persuade"])}
    assert not claims("train") & claims("test")


def test_withholding_a_kind_the_data_lacks_is_refused_for_the_bench():
    with pytest.raises(UnknownFactKind, match="shape"):
        check_kinds(["shape"], BENCH.load_tasks("train"))


def test_unknown_gym_is_one_clear_error():
    with pytest.raises(UnknownGym, match="choose from"):
        BENCH.load_tasks("train", ["search"])


def test_userrl_files_load_every_task(benchdata):
    import pyarrow.parquet as pq
    from training.benches.usergym.userrl import PARQUET
    for split in ("train", "test"):
        tasks = BENCH.load_tasks(split, data_dir=benchdata)
        counts = collections.Counter(t.gym for t in tasks)
        for gym, folder in PARQUET.items():
            path = benchdata / "userrl" / "data" / folder / f"{split}.parquet"
            assert counts.get(gym, 0) == (pq.read_metadata(path).num_rows if path.exists() else 0)
        snap = snapshot()
        for task in tasks:
            if task.data["runnable"]:
                env = BENCH.make_env(task, snap, seed=0)
                env.reset()
                assert 0.0 <= env.step("[action] Is it big?")[1] <= 1.0
            else:
                with pytest.raises(ValueError, match="cannot be run offline"):
                    BENCH.make_env(task, snap, seed=0)


def test_userrl_function_tasks_score_with_the_pool_answer(benchdata):
    task = BENCH.load_tasks("test", ["function"], data_dir=benchdata)[0]
    env = BENCH.make_env(task, snapshot(), seed=0)
    env.reset()
    _, r, terminated, _, info = env.step(f"[answer] {task.data['expected']}")
    assert r == 1.0 and info["success"]


def test_a_snapshot_withholding_an_unknown_kind_fails_when_the_env_is_made():
    task = BENCH.load_tasks("train", ["travel"])[0]
    with pytest.raises(UnknownFactKind, match="'shape'"):
        BENCH.make_env(task, snapshot(user={"travel": {"withhold_kinds": ["shape"]}}), seed=0)
    BENCH.make_env(task, snapshot(user={"travel": {"withhold_kinds": ["preference"]}}), seed=0)


# What each gym shows the agent of the hidden facts' subject: repeating it must earn nothing. The
# shipped tables had that flaw in 7 of 90 test tasks ("office", "saving", "parent", and "light" as
# a prefix of "lighthouse"). UserRL's files are checked against the whole prompt instead, below.
_SHOWN = {"persuade": ("answer", lambda t: t.data["claim"]),
          "turtle": ("answer", lambda t: f"{t.data['title']} {t.data['surface']}"),
          "intention": ("action", lambda t: f"{t.data['category']} {t.data['task']}")}


def _paid_for_the_prompt(tasks) -> list[str]:
    from usergym_helpers import make

    paid = []
    for task in tasks:
        act, shown = _SHOWN[task.gym]
        env = make(task)
        if env.step(f"[{act}] {shown(task)}")[1] > 0:
            paid.append(task.id)
    return paid


@pytest.mark.parametrize("gym", sorted(_SHOWN))
def test_repeating_the_prompt_earns_nothing_in_the_shipped_tasks(gym):
    tasks = BENCH.load_tasks("train", [gym]) + BENCH.load_tasks("test", [gym])
    assert _paid_for_the_prompt(tasks) == []


def _paid_for_the_real_prompt(tasks) -> dict[str, list[str]]:
    """gym -> the runnable tasks (with the tool) where sending back, as the agent's first turn,
    the prompt it reads (the system prompt and the first observation from reset(), the context
    training.rollout.start_episode builds) earns reward, with any of the gym's tools."""
    snap = snapshot()
    paid: dict[str, list[str]] = {}
    for task in tasks:
        if not task.data["runnable"]:
            continue
        paid.setdefault(task.gym, [])
        for act in ACTS[task.gym]:
            env = BENCH.make_env(task, snap, seed=0)
            obs, _ = env.reset()
            if env.step(f"[{act}] {BENCH.system_prompt(task)}\n{obs}")[1] > 0:
                paid[task.gym].append(f"{task.id} [{act}]")
    return paid


def test_sending_back_the_real_prompt_earns_nothing_in_the_userrl_test_files(benchdata):
    """Every task of every UserRL test file the loader reads. Before the keys left out the whole
    prompt (only the claim, the title and surface, the category and task were left out), this
    paid in 7 of 42 persuade tasks ("environment" against "environmental"), 3 of 48 turtle tasks
    ("hidden") and 5 of 40 intention tasks ("details" against "detail", "user's city")."""
    tasks = BENCH.load_tasks("test", data_dir=benchdata)
    paid = _paid_for_the_real_prompt(tasks)
    assert sorted(paid) == ["function", "intention", "persuade", "telepathy", "turtle"]
    assert {g: len(ids) for g, ids in paid.items()} == {g: 0 for g in paid}, paid
    # and every task can still be won: each persuade task keeps the two reasons a win needs
    assert all(len(t.facts) >= 2 for t in tasks if t.gym == "persuade")
    assert all(t.facts for t in tasks if t.gym in ("persuade", "turtle", "intention"))
