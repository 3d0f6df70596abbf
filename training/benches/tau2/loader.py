"""Load tau2 tasks: ours (shipped beside each domain) or tau2-bench's files given by path.

tau2-bench's layout (v0.2.0): `data/tau2/domains/<domain>/` holds `tasks.json` (telecom:
`tasks_small.json`, `tasks_full.json`), `db.json` (telecom: `db.toml` and the phone's
`user_db.toml`), `policy.md` (telecom: `main_policy.md` + `tech_support_manual.md`) and
`split_tasks.json` (`{"train": [ids], "test": [ids], ...}`). `find_domain_dir` accepts the
repository root, its `data/tau2/domains` folder, or the domain folder itself.

Each task becomes a `Task` whose `data` carries everything the environment, the users and the
scorer need (the tau2 task record, reduced):
  domain, db / user_db ("shipped" or a file path), policy (text), scenario {reason_for_call,
  known_info, unknown_info, task_instructions, persona}, ticket, initial_state, actions,
  env_assertions, communicate_info, reward_basis (tau2's default when absent: DB, COMMUNICATE).
The user's scenario `known_info` is split into Facts (one per sentence or clause), which the
symbolic user discloses when asked.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from training.benches.base import Fact, Task
from training.benches.tau2.domain import DOMAINS, PACKAGE_DIR, Tau2DataError

DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")
TASK_FILES = ("tasks.json", "tasks_small.json")
SPLITS = ("train", "test")


def find_domain_dir(data_dir: str | Path, domain: str) -> Path | None:
    root = Path(data_dir)
    for candidate in (root / domain, root / "domains" / domain,
                      root / "data" / "tau2" / "domains" / domain,
                      root / "tau2" / "data" / "tau2" / "domains" / domain):
        if any((candidate / f).is_file() for f in TASK_FILES):
            return candidate
    return None


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Tau2DataError(f"cannot read {path}: {exc}.") from None


def load_policy(domain_dir: Path) -> str:
    """The agent's policy text; telecom's is its main policy followed by the tech-support manual."""
    parts = [domain_dir / n for n in ("policy.md", "main_policy.md", "tech_support_manual.md")]
    texts = [p.read_text() for p in parts if p.is_file()]
    if not texts:
        raise Tau2DataError(f"no policy.md in {domain_dir}.")
    return "\n\n".join(texts)


def load_split_ids(domain_dir: Path) -> dict[str, set[str]] | None:
    path = domain_dir / "split_tasks.json"
    if not path.is_file():
        return None
    raw = read_json(path)
    return {k: set(map(str, v)) for k, v in raw.items() if isinstance(v, list)}


def load_domain_tasks(domain_dir: str | Path, domain: str, split: str | None = None) -> list[Task]:
    """tau2-bench tasks of one domain folder. `split` "train"/"test" keeps the ids that
    split_tasks.json lists (every task counts as "test" when there is no split file or none of
    the file's ids is in its train/test lists); None keeps all tasks, each marked with its split."""
    domain_dir = Path(domain_dir)
    tasks_path = next((domain_dir / f for f in TASK_FILES if (domain_dir / f).is_file()), None)
    if tasks_path is None:
        raise Tau2DataError(f"no tasks.json in {domain_dir}.")
    raw_tasks = read_json(tasks_path)
    if not isinstance(raw_tasks, list):
        raise Tau2DataError(f"{tasks_path} must hold a JSON list of tasks.")
    # a missing database (tau2-bench's airline db.json is not always at hand) stays a path that
    # does not exist: the task loads, and running it says which file is missing
    db = next((domain_dir / n for n in ("db.json", "db.toml") if (domain_dir / n).is_file()),
              domain_dir / "db.json")
    user_db = domain_dir / "user_db.toml"
    splits = load_split_ids(domain_dir)
    ids = {str(r.get("id")) for r in raw_tasks if isinstance(r, dict)}
    if splits is not None and not ids & (splits.get("train", set()) | splits.get("test", set())):
        splits = None   # e.g. telecom's tasks_small.json: none of its ids are in train/test
    policy = load_policy(domain_dir)
    tasks = []
    for raw in raw_tasks:
        tid = str(raw.get("id"))
        task_split = "test"
        if splits is not None:
            task_split = next((s for s in SPLITS if tid in splits.get(s, ())), "none")
        if split is not None and task_split != split:
            continue
        tasks.append(task_from_tau2(raw, domain, task_split, policy=policy,
                                    db=str(db),
                                    user_db=str(user_db) if user_db.is_file() else None))
    return tasks


def task_from_tau2(raw: dict, domain: str, split: str, *, policy: str, db: str | None,
                   user_db: str | None = None) -> Task:
    """One tau2-bench task record as our Task (see the module docstring for `data`)."""
    if domain not in DOMAINS:
        raise Tau2DataError(f"unknown tau2 domain {domain!r}.")
    try:
        tid = str(raw["id"])
        instructions = raw["user_scenario"]["instructions"]
    except (KeyError, TypeError):
        raise Tau2DataError(f"a {domain} task lacks id or user_scenario.instructions.") from None
    if isinstance(instructions, str):
        instructions = {"task_instructions": instructions}
    criteria = raw.get("evaluation_criteria") or {}
    scenario = {k: instructions.get(k) or "" for k in
                ("reason_for_call", "known_info", "unknown_info", "task_instructions")}
    scenario["persona"] = (raw.get("user_scenario") or {}).get("persona") or ""
    data = {
        "domain": domain, "db": db, "user_db": user_db, "policy": policy,
        "scenario": scenario, "ticket": raw.get("ticket") or "",
        "initial_state": raw.get("initial_state"),
        "actions": [normalize_action(a) for a in criteria.get("actions") or []],
        "env_assertions": list(criteria.get("env_assertions") or []),
        "communicate_info": [str(c) for c in criteria.get("communicate_info") or []],
        "reward_basis": list(criteria.get("reward_basis") or DEFAULT_REWARD_BASIS),
    }
    return Task(id=f"{domain}/{tid}", gym=domain, split=split,
                prompt=opening_message(scenario), facts=scenario_facts(f"{domain}/{tid}", scenario),
                data=data)


def normalize_action(action: dict) -> dict:
    return {"name": action["name"], "arguments": dict(action.get("arguments") or {}),
            "requestor": action.get("requestor") or "assistant",
            "compare_args": action.get("compare_args")}


# -- the user's side -----------------------------------------------------------------------------
_PERSON = [(r"\bYou are\b", "I am"), (r"\byou are\b", "I am"), (r"\bYou were\b", "I was"),
           (r"\byou were\b", "I was"), (r"\bYou've\b", "I've"), (r"\byou've\b", "I've"),
           (r"\bYour\b", "My"), (r"\byour\b", "my"), (r"\byourself\b", "myself"),
           (r"\bYou\b", "I"), (r"\byou\b", "me")]


def first_person(text: str) -> str:
    """Turn the scenario's second-person sentences into the user's own words (roughly)."""
    for pattern, repl in _PERSON:
        text = re.sub(pattern, repl, text)
    # "me" after a verb start is usually the subject: "I ... and me want" -> fix the common forms
    return re.sub(r"\b(and|but|so|if|that|when) me\b", r"\1 I", text)


def opening_message(scenario: dict) -> str:
    """The user's first message: the reason for the call, in the first person, first sentence."""
    reason = " ".join(scenario.get("reason_for_call", "").split())
    if not reason:
        return "Hi, I need some help."
    first = re.split(r"(?<=[.!?])\s+", reason)[0]
    return "Hi! " + first_person(first)


_KIND_WORDS = {
    "email": ("email", ("email", "e-mail", "mail")),
    "zip": ("identity", ("zip", "zipcode", "postal", "name", "address")),
    "user id": ("identity", ("user id", "user_id", "id", "account", "name")),
    "phone": ("identity", ("phone", "number", "name")),
    "confirmation": ("booking", ("reservation", "confirmation", "booking", "number")),
    "order": ("order", ("order", "number", "id")),
    "born": ("identity", ("birth", "dob", "born", "date")),
    "birth": ("identity", ("birth", "dob", "born", "date")),
    "abroad": ("situation", ("where", "location", "abroad", "travel", "country")),
    "home": ("situation", ("where", "location", "abroad", "home", "country")),
    "you are ": ("identity", ("name", "who", "identity", "verify", "authenticate")),
}


def sentences(text: str) -> list[str]:
    text = " ".join((text or "").split())
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def scenario_facts(task_id: str, scenario: dict) -> tuple[Fact, ...]:
    """The user's facts: the sentences of `reason_for_call` (kind "request"; the first, importance 3,
    is the opening message) and the items of `known_info` (identity, order, booking, situation...),
    which the symbolic user discloses when asked about them."""
    facts = [Fact(id=f"{task_id}#r{i}", kind="request", text=first_person(s),
                  keywords=tuple(re.findall(r"[a-z]{5,}", s.lower())[:6]),
                  importance=3 if i == 0 else 2)
             for i, s in enumerate(sentences(scenario.get("reason_for_call", "")))]
    items = sentences(scenario.get("known_info", ""))
    for i, item in enumerate(items):
        low = item.lower()
        kind, keywords = "detail", tuple(w for w in re.findall(r"[a-z]{4,}", low)[:6])
        for cue, (k, words) in _KIND_WORDS.items():
            if cue in low:
                kind, keywords = k, words
                break
        facts.append(Fact(id=f"{task_id}#k{i}", kind=kind, text=first_person(item),
                          keywords=keywords))
    return tuple(facts)


def load_shipped_tasks(domain: str, split: str | None = None) -> list[Task]:
    """Our own tasks of a domain (written by `<domain>/generate.py`), in the same tau2 format."""
    path = PACKAGE_DIR / domain / "tasks.json"
    raw = read_json(path)
    policy = (PACKAGE_DIR / domain / "policy.md").read_text()
    tasks = []
    for record in raw:
        record_split = record.get("split", "train")
        if split is not None and record_split != split:
            continue
        tasks.append(task_from_tau2(record, domain, record_split, policy=policy, db="shipped",
                                    user_db="shipped" if domain == "telecom" else None))
    return tasks
