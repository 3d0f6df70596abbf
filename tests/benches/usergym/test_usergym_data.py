"""The shipped tasks (counts, schema, fact kinds, reproducible from the seed) and the loader of
UserRL's real files (every real task loads; the runnable ones run)."""
from __future__ import annotations

import collections
import json
import re

import pytest

from training.benches.base import Fact, Task
from training.benches.usergym import BENCH, MODULES, UnknownGym
from training.benches.usergym.common import ACTS, DATA_DIR, task_to_json
from training.benches.usergym.generate import build, keys_outside_prompt
from training.users.symbolic import UnknownFactKind, check_kinds
from usergym_helpers import make, snapshot


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_each_gym_ships_enough_tasks_with_declared_fact_kinds(gym):
    train, test = BENCH.load_tasks("train", [gym]), BENCH.load_tasks("test", [gym])
    assert len(train) >= 100 and len(test) >= 30
    ids = [t.id for t in train + test]
    assert len(set(ids)) == len(ids)
    kinds = {f.kind for t in train + test for f in t.facts}
    stated = {f.kind for t in train + test for f in t.stated}
    # telepathy's prompt names the category ("I am thinking of a fruit"): every shipped task states
    # it and none hides it (UserRL's files hide their own label where the prompt lacks it)
    assert kinds == set(MODULES[gym].FACT_KINDS) - ({"category"} if gym == "telepathy" else set())
    assert stated == ({"category"} if gym == "telepathy" else set())
    if gym == "telepathy":
        assert all(len(t.stated) == 1 for t in train + test)
    assert all(t.gym == gym and t.prompt and t.facts for t in train + test)
    assert all(f.keywords for t in train + test for f in t.facts)     # each can be asked for
    check_kinds(sorted(kinds), train)


@pytest.mark.parametrize("gym", BENCH.gyms)
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


def test_sending_back_the_real_prompt_earns_nothing_in_the_userrl_test_files(benchdata):
    """Every runnable task of every UserRL test file the loader reads: no reward, no fact revealed,
    no win, with any of the gym's tools. Before the keys left out the whole prompt (only the claim,
    the title and surface, the category and task were left out), this paid in 7 of 42 persuade
    tasks ("environment" against "environmental"), 3 of 48 turtle tasks ("hidden") and 5 of 40
    intention tasks ("details" against "detail", "user's city"). Checked for reward alone, it let
    the user reveal a fact in 36 of the 41 telepathy tasks: the category the prompt names ("I am
    thinking of a fruit", now stated, not hidden) and attributes keyed by a word of the prompt
    ("mountain" for "a famous mountain")."""
    tasks = BENCH.load_tasks("test", data_dir=benchdata)
    runnable = [t for t in tasks if t.data["runnable"]]
    assert sorted({t.gym for t in runnable}) == ["function", "intention", "persuade", "telepathy", "turtle"]
    snap = snapshot()
    earned = {t.id: e for t in runnable if (e := _what_the_prompt_earns(t, snap))}
    assert earned == {}
    # and every task can still be won: each persuade task keeps the two reasons a win needs
    assert all(len(t.facts) >= 2 for t in tasks if t.gym == "persuade")
    assert all(t.facts for t in tasks if t.gym in ("persuade", "turtle", "intention"))


def test_the_generator_leaves_the_prompts_words_out_of_keys():
    """A key the agent's prompt hits is dropped ("time": the intention system prompt asks about
    "one missing detail at a time"); a fact the prompt would leave without keys is refused."""
    data = {"category": "Cooking", "task": "Give me a recipe."}
    task = Task("intention-x", "intention", "train", "Give me a recipe.",
                (Fact("d0", "detail", "Cooking time: quick.", ("time", "quick")),), data)
    assert keys_outside_prompt(task).facts[0].keywords == ("quick",)
    bare = Task("intention-x", "intention", "train", "Give me a recipe.",
                (Fact("d0", "detail", "Cooking time: quick.", ("time", "recipe")),), data)
    with pytest.raises(ValueError, match="every keyword of fact 'd0' .time, recipe."):
        keys_outside_prompt(bare)


def _what_the_prompt_earns(task, snap) -> list[str]:
    """What sending back, as the agent's first turn, the prompt it reads (BENCH.agent_prompt: the
    system prompt and the first observation, the context training.rollout.start_episode builds)
    earns under each of the gym's tools: a reward, a fact the user reveals (the workspace's
    elicited_fact pays 0.2 for one when the turn asks), or a won episode."""
    from training.benches.usergym.travel import _OPTION_ID

    example = _OPTION_ID.search(BENCH.system_prompt(task)) if task.gym == "travel" else None
    earned = []
    for act in ACTS[task.gym]:
        env = BENCH.make_env(task, snap, seed=0)
        env.reset()
        _, reward, _, _, info = env.step(f"[{act}] {BENCH.agent_prompt(task)}")
        # TravelGym's system prompt shows the id format with "[answer] H3"; sent back, that
        # recommends H3, a blind guess no key can prevent: on the shipped train tasks with a hotel
        # (seed 0) H3 is one of the acceptable options in 18 of 61, and each of H1..H11 in 14 to 20
        # (3 of the 11 options are acceptable). Any other travel answer credit would be the prompt's.
        guess = example is not None and info.get("recommended") == example.group(1)
        if reward > 0 and not guess:
            earned.append(f"[{act}] reward {reward:.2f}")
        if info["revealed_facts"]:
            earned.append(f"[{act}] reveals {', '.join(info['revealed_facts'])}")
        if info.get("success") and not guess:
            earned.append(f"[{act}] wins")
    return earned


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_sending_back_the_real_prompt_earns_nothing_in_the_shipped_tasks(gym):
    """Every shipped task of every gym (all run offline). generate.py leaves the prompt's words
    out of the facts' keys; before, with keys written against a stand-in prompt, this paid reward
    in 40 of 150 intention tasks ("time" in the system prompt's "one missing detail at a time"),
    12 of 144 turtle ("act" in "You act through one tool"), 6 of 150 persuade ("thinking" against
    "think") and revealed a fact in every travel (the aspect: "I need a hotel"), tau ("name" in
    the tool-call format) and telepathy task (the category: "I am thinking of a fruit")."""
    snap = snapshot()
    tasks = BENCH.load_tasks("train", [gym]) + BENCH.load_tasks("test", [gym])
    earned = {t.id: e for t in tasks if (e := _what_the_prompt_earns(t, snap))}
    assert earned == {}


def _named(task) -> str:
    """What a telepathy prompt says the entity is: "I am thinking of a fruit. Try to guess ..." ->
    "a fruit" (every shipped and UserRL prompt reads so)."""
    return re.search(r"I am thinking of (.+?)[.!]?\s+Try to guess", task.prompt).group(1)


def _category_mistakes(tasks) -> dict[str, str]:
    """task id -> a reply of the default user that contradicts the prompt or pays for it: asked
    about the category its prompt names, anything but a bare "Yes." that earns no reward and
    reveals nothing; asked "Is it a fruit?" when its prompt names no fruit, anything but "No."."""
    snap = snapshot()
    wrong = {}
    for task in tasks:
        env = BENCH.make_env(task, snap, seed=0)
        env.reset()
        obs, reward, _, _, info = env.step(f"[action] Is it {_named(task)}?")
        if (obs, reward, info["revealed_facts"], info["asked_question"]) != ("Yes.", 0.0, [], True):
            wrong[task.id] = f"{_named(task)}: {obs!r}, reward {reward}, revealed {info['revealed_facts']}"
        if "fruit" not in _named(task):
            obs = env.step("[action] Is it a fruit?")[0]
            if obs != "No.":
                wrong[task.id] = f"{_named(task)}: a fruit? {obs!r}"
    return wrong


def test_the_telepathy_user_confirms_the_category_its_prompt_names_and_tells_nothing():
    """Every shipped telepathy task (15 of them fruit). With the category fact dropped to keep it
    out of what the prompt earns, the user answered "No." to its own prompt's category in all 132;
    now the category is stated (Task.stated): confirmed, never revealed or paid."""
    tasks = BENCH.load_tasks("train", ["telepathy"]) + BENCH.load_tasks("test", ["telepathy"])
    assert sum(_named(t) == "a fruit" for t in tasks) == 15
    assert _category_mistakes(tasks) == {}


def test_the_userrl_telepathy_user_confirms_the_category_its_prompt_names_and_tells_nothing(benchdata):
    """Every UserRL telepathy test task. Before, the file's category label was a hidden fact: the
    user revealed it (and elicited_fact paid 0.2) in the 36 tasks whose prompt names it, and said
    "No." in the 5 whose prompt names another ("a fruit" for the label "food")."""
    tasks = BENCH.load_tasks("test", ["telepathy"], data_dir=benchdata)
    assert sum("fruit" in _named(t) for t in tasks) == 3
    assert _category_mistakes(tasks) == {}
    kiwi = next(t for t in tasks if t.data["category"] == "food" and _named(t) == "a fruit")
    env = make(kiwi)                                   # the label the prompt lacks stays hidden
    assert env.step("[action] Is it food?")[4]["revealed_facts"] == ["label"]
