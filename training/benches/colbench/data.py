"""Load ColBench backend-programming tasks: ours (shipped) or original-format files given by path.

The original schema (ColBench / SWEET-RL backend tasks, one JSON object per line):
  problem_description: str        what the agent is told
  ground_truth: str               the reference Python source (held privately by the collaborator)
  test_cases: {name: expr}        hidden call expressions, evaluated on reference and answer
Our shipped files add `task_id`, `family`, `func` and `hidden_facts` ([{id, kind, text, keywords}]).
A file without `hidden_facts` (the original data) gets facts derived from the reference by
reading its syntax tree (`derive_facts`): the arguments and their defaults, the early returns
behind an `if` (edge cases), the shape of a returned literal and the final return. So the
symbolic collaborator can answer on any file, and everything it says comes from the reference.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from training.benches.base import Fact, Task

DATA_DIR = Path(__file__).resolve().parent / "data"
GYM = "colbench"


class TaskFileError(ValueError):
    """A task file that is missing or not in the ColBench schema (names the file and line)."""


def _short(node: ast.AST, limit: int = 100) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def func_name(ground_truth: str, test_cases: dict[str, str]) -> str:
    """The function the tests call (the first test's callee), else the reference's last def."""
    for expr in test_cases.values():
        try:
            node = ast.parse(expr, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id
    defs = [n.name for n in ast.parse(ground_truth).body if isinstance(n, ast.FunctionDef)]
    return defs[-1] if defs else ""


def derive_facts(ground_truth: str, func: str, id_prefix: str) -> tuple[Fact, ...]:
    """Facts about the reference `func`, read from its syntax tree (see the module docstring)."""
    try:
        tree = ast.parse(ground_truth)
    except SyntaxError:
        return ()
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func), None)
    if fn is None:
        return ()
    out: list[tuple[str, str, tuple[str, ...]]] = []
    args = fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]], fn.args.defaults))
    for a in args:
        text = f"The argument {a.arg!r}" + (f" defaults to {_short(defaults[a.arg])}." if a.arg in defaults
                                           else " is required.")
        out.append(("argument", text, (a.arg, "argument", "default")))
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and node.body and isinstance(node.body[0], (ast.Return, ast.Raise)):
            first = node.body[0]
            then = (f"it returns {_short(first.value)}" if isinstance(first, ast.Return) and first.value
                    else "it raises an error" if isinstance(first, ast.Raise) else "it returns None")
            cond = _short(node.test)
            kw = tuple(dict.fromkeys(n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)))[:4]
            out.append(("edge_case", f"When {cond}, {then}.", kw + ("when", "case", "edge")))
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    for r in returns:
        if isinstance(r.value, ast.Dict) and all(isinstance(k, ast.Constant) for k in r.value.keys):
            keys = ", ".join(repr(k.value) for k in r.value.keys)
            out.append(("shape", f"It returns a dict with keys {keys}.", ("return", "keys", "dict", "shape")))
        elif isinstance(r.value, (ast.List, ast.Tuple, ast.ListComp)):
            out.append(("shape", f"It returns a list: {_short(r.value)}.", ("return", "list", "shape")))
    if returns:
        out.append(("return", f"In the end it returns {_short(returns[-1].value)}.",
                    ("return", "result", "output")))
    seen, facts = set(), []
    for kind, text, kw in out:
        if text not in seen:
            seen.add(text)
            facts.append(Fact(id=f"{id_prefix}/f{len(facts)}", kind=kind, text=text, keywords=kw))
    return tuple(facts)


def record_to_task(obj: dict[str, Any], split: str, default_id: str) -> Task:
    for key in ("problem_description", "ground_truth", "test_cases"):
        if key not in obj:
            raise KeyError(key)
    tests = obj["test_cases"]
    if isinstance(tests, str):            # some exports store the dict as a JSON string
        tests = json.loads(tests)
    if not isinstance(tests, dict) or not all(isinstance(v, str) for v in tests.values()):
        raise TypeError("test_cases must be a dict of name -> call expression")
    task_id = str(obj.get("task_id") or default_id)
    func = obj.get("func") or func_name(obj["ground_truth"], tests)
    if "hidden_facts" in obj:
        facts = tuple(Fact(id=f["id"], kind=f["kind"], text=f["text"], keywords=tuple(f.get("keywords", ())),
                           importance=int(f.get("importance", 1))) for f in obj["hidden_facts"])
    else:
        facts = derive_facts(obj["ground_truth"], func, task_id)
    data = {"ground_truth": obj["ground_truth"], "test_cases": dict(tests), "func": func,
            "family": obj.get("family", "")}
    return Task(id=task_id, gym=GYM, split=split, prompt=obj["problem_description"], facts=facts, data=data)


def read_jsonl(path: Path, split: str) -> list[Task]:
    path = Path(path)
    if not path.is_file():
        raise TaskFileError(f"ColBench task file {path} not found: pass a JSONL file or a folder holding "
                            f"{split}.jsonl.")
    tasks = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(record_to_task(json.loads(line), split, f"{path.stem}-{n:05d}"))
        except (json.JSONDecodeError, KeyError, TypeError, SyntaxError) as exc:
            raise TaskFileError(f"{path}:{n}: not a ColBench task (needs problem_description, "
                                f"ground_truth and test_cases as a dict of call expressions): {exc!r}.") from None
    return tasks


def find_file(data_dir: Path, split: str) -> Path:
    """`data_dir` may be the JSONL file itself or a folder with `<split>.jsonl` (also under
    `backend_tasks/`, the original dataset's layout)."""
    data_dir = Path(data_dir)
    if data_dir.is_file():
        return data_dir
    for cand in (data_dir / f"{split}.jsonl", data_dir / "backend_tasks" / f"{split}.jsonl"):
        if cand.is_file():
            return cand
    raise TaskFileError(f"no ColBench {split} file under {data_dir}: expected {split}.jsonl or "
                        f"backend_tasks/{split}.jsonl.")


def load_tasks(split: str = "train", gyms=None, data_dir: str | Path | None = None) -> list[Task]:
    """Our shipped tasks, or the original-format file(s) under `data_dir`."""
    if split not in ("train", "test"):
        raise TaskFileError(f"unknown split {split!r}: choose train or test.")
    if gyms is not None and GYM not in gyms:
        return []
    path = find_file(data_dir, split) if data_dir is not None else DATA_DIR / f"{split}.jsonl"
    return read_jsonl(path, split)


def fact_kinds(tasks: list[Task] | None = None) -> set[str]:
    """The fact kinds the data has: what withhold_kinds and a rule's `kinds` may name."""
    if tasks is None:
        tasks = load_tasks("train") + load_tasks("test")
    return set().union(*(t.fact_kinds() for t in tasks)) if tasks else set()
