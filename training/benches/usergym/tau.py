"""TauGym: a small retail customer-service desk (after tau-bench's retail domain, as UserRL wraps it).

The user wants an order cancelled or some items returned, but opens with a vague request; the agent
asks the user ([action]) for who they are and what they want, lists the tools with `[search] tools`
(or `[search] help`), and calls a tool with `[answer] {"name": ..., "arguments": {...}}`. Read tools
answer and the episode goes on; the first write tool call ends it.

Reward (UserRL's TauGym semantics): 1.0 when the write call is exactly the task's goal (same tool,
same arguments; item lists compared as sets), else 0.0; every other turn pays 0. success = that.

Task data: facts are what the user knows, Fact(kind="identity" | "order" | "request");
`data` = {"user": {"user_id", "first_name", "last_name", "zip"}, "orders": {order_id: {"status":
"pending" | "delivered", "items": [{"item_id", "name", "price"}]}}, "goal": {"name", "arguments"}}.
"""
from __future__ import annotations

import json
import random
from typing import Any

from training.benches.base import Fact, Task
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "tau"
FACT_KINDS = frozenset({"identity", "order", "request"})
TOOLS = {
    "find_user_id_by_name_zip": {"args": ["first_name", "last_name", "zip"], "write": False,
                                 "doc": "Find a user id from first name, last name and zip code."},
    "get_user_details": {"args": ["user_id"], "write": False, "doc": "List a user's orders."},
    "get_order_details": {"args": ["order_id"], "write": False, "doc": "Status and items of an order."},
    "cancel_pending_order": {"args": ["order_id", "reason"], "write": True,
                             "doc": "Cancel a pending order; reason is 'no longer needed' or 'ordered by mistake'."},
    "return_delivered_order_items": {"args": ["order_id", "item_ids"], "write": True,
                                     "doc": "Return some items (a list of item ids) of a delivered order."},
}
HELP = ("First authenticate the user by name and zip code, then look up their orders, confirm what "
        "they want, and make exactly one write call.")
FIRST = ["Alex", "Maria", "Yusuf", "Chen", "Olga", "Ravi", "Lena", "Tom", "Aisha", "Diego", "Mei", "Ivan"]
LAST = ["Kim", "Rossi", "Garcia", "Novak", "Patel", "Silva", "Moreau", "Berg", "Khan", "Lopez", "Sato"]
PRODUCTS = ["keyboard", "mouse", "monitor", "desk lamp", "backpack", "water bottle", "headphones",
            "thermostat", "coffee maker", "running shoes", "yoga mat", "blender", "tablet case"]
REASONS = ["no longer needed", "ordered by mistake"]


def _step_of(name: Any) -> str:
    """The step (training/steps.py) a rejected call was on its way to: an unparsed call or an
    unknown tool counts against identification, which every episode needs first (HELP)."""
    if name in ("get_user_details", "get_order_details"):
        return "lookup"
    return "write" if name in TOOLS and TOOLS[name]["write"] else "identify"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return sorted(map(str, a)) == sorted(map(str, b))
    return str(a).strip().lower() == str(b).strip().lower()


def tool_listing() -> str:
    """What "[search] tools" answers: every tool's name, arguments and description, as JSON (the
    built-in agent's worked example quotes it, orchestrator/agents/remedies.py)."""
    return json.dumps([{"name": n, "arguments": t["args"], "description": t["doc"]}
                       for n, t in TOOLS.items()])


class TauEnv(UserGymEnv):
    gym = GYM
    user_role = ("You are a customer contacting support. Give your name, zip code, order and what "
                 "you want only when the agent asks for each.")

    def setup(self) -> None:
        self.solved = False

    def intro(self) -> str:
        return (f"Here is my request: {self.task.prompt}\nTry to fulfill it step by step by calling the "
                f"internal tools and communicating with me!")

    def on_agent(self, act: str, content: str) -> Outcome:
        if act == "action":
            return Outcome(to_user=True)
        if act == "search":
            if "help" in content.lower():
                return Outcome(obs=HELP)
            return Outcome(obs=tool_listing())
        return self._call(content)

    def _call(self, content: str) -> Outcome:
        try:
            call = json.loads(content)
            name, args = call["name"], dict(call.get("arguments", {}))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            err = 'a tool call is [answer] {"name": TOOL, "arguments": {...}}'
            return Outcome(obs=f"Error: {err}.", tool_calls=[{"name": None, "arguments": content,
                                                              "result": None, "error": err}],
                           info={"rejected": _step_of(None)})
        if name not in TOOLS or set(args) != set(TOOLS[name]["args"]):
            err = f"unknown tool {name!r} or wrong arguments" if name not in TOOLS else \
                f"{name} takes {', '.join(TOOLS[name]['args'])}"
            return Outcome(obs=f"Error: {err}.", tool_calls=[{"name": name, "arguments": args,
                                                              "result": None, "error": err}],
                           info={"rejected": _step_of(name)})
        if TOOLS[name]["write"]:
            goal = self.task.data["goal"]
            ok = name == goal["name"] and all(_same(args.get(k), v) for k, v in goal["arguments"].items())
            self.solved = ok
            result = "done" if ok else "the request was not what the user wanted"
            return Outcome(obs=f"Tool result: {result}.", reward=float(ok), terminated=True,
                           tool_calls=[{"name": name, "arguments": args, "result": result, "error": None}])
        result = self._read(name, args)
        return Outcome(obs=f"Tool result: {json.dumps(result)}",
                       tool_calls=[{"name": name, "arguments": args, "result": result, "error": None}])

    def _read(self, name: str, args: dict) -> Any:
        d = self.task.data
        user, orders = d["user"], d["orders"]
        if name == "find_user_id_by_name_zip":
            match = all(_same(args[k], user[k]) for k in ("first_name", "last_name", "zip"))
            return user["user_id"] if match else "Error: user not found"
        if name == "get_user_details":
            return {"orders": list(orders)} if _same(args["user_id"], user["user_id"]) else "Error: user not found"
        order = orders.get(str(args["order_id"]).strip())
        return order if order is not None else "Error: order not found"

    def score(self) -> float:
        return float(self.solved)

    def success(self) -> bool:
        return self.solved


def generate(rng: random.Random, n: int) -> list[Task]:
    tasks = []
    for i in range(n):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        zip_code = f"{rng.randint(10000, 99999)}"
        user = {"user_id": f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}",
                "first_name": first, "last_name": last, "zip": zip_code}
        orders = {}
        for _ in range(rng.choice((2, 3))):
            items = [{"item_id": str(rng.randint(10**9, 10**10 - 1)), "name": p,
                      "price": round(rng.uniform(10, 300), 2)} for p in rng.sample(PRODUCTS, rng.choice((2, 3)))]
            orders[f"#W{rng.randint(10**6, 10**7 - 1)}"] = {"status": rng.choice(("pending", "delivered")),
                                                            "items": items}
        target = rng.choice(list(orders))
        order = orders[target]
        # "name" alone is a word of the system prompt's tool-call format ({"name": TOOL, ...}), so
        # the name is keyed by phrases a question about it says and the prompt does not
        facts = [Fact("name", "identity", f"My name is {first} {last}.",
                      ("your name", "full name", "last name")),
                 Fact("zip", "identity", f"My zip code is {zip_code}.", ("zip", "postal")),
                 Fact("order", "order", f"The order is {target}.", ("order number", "order id", "which order"))]
        if order["status"] == "pending":
            reason = rng.choice(REASONS)
            goal = {"name": "cancel_pending_order", "arguments": {"order_id": target, "reason": reason}}
            facts.append(Fact("request", "request", f"I want to cancel it: {reason}.", ("reason", "why")))
            prompt = "Hi, I have a problem with an order I placed recently. Can you help?"
        else:
            chosen = order["items"][: rng.choice((1, len(order["items"])))]
            goal = {"name": "return_delivered_order_items",
                    "arguments": {"order_id": target, "item_ids": [it["item_id"] for it in chosen]}}
            names = " and the ".join(it["name"] for it in chosen)
            facts.append(Fact("request", "request", f"I want to return the {names}.", ("which item", "what item", "items")))
            prompt = "Hello! I received an order and I am not happy with part of it. Can you help me?"
        tasks.append(Task(id="", gym=GYM, split="", prompt=prompt, facts=tuple(facts),
                          data={"user": user, "orders": orders, "goal": goal}))
    return tasks
