"""Hand-written trajectory episodes, one builder per behaviour the progress findings look for, in
the trainer's record format (DESIGN.md, trajectories/step-NNNNNN.jsonl). Invented for the tests:
the texts are what an untrained small policy writes, not copies from a run."""
from __future__ import annotations

import json


def turn(agent: str, user: str = "Okay.", **kw) -> dict:
    t = {"agent": agent, "user": user, "reward": 0.0, "revealed_facts": [], "leaked_facts": [],
         "new_facts": [], "repeated": False, "asked_question": agent.rstrip().endswith("?"),
         "answered": False, "invalid_action": False, "rule_id": None, "tool_calls": []}
    t.update(kw)
    return t


def ep(gym: str, turns: list[dict], *, prompt: str = "", success: bool = False,
       truncated: bool = True, step: int | None = None, task: str = "t1") -> dict:
    for i, t in enumerate(turns, 1):
        t.setdefault("turn", i)
    out = {"gym": gym, "task_id": task, "user_arm": "symbolic", "prompt": prompt, "turns": turns,
           "score": 1.0 if success else 0.0, "success": success, "truncated": truncated}
    if step is not None:
        out["step"] = step
    return out


def travel_blind(option: str = "H5") -> dict:
    """Asks once, then recommends an option id it never searched for."""
    return ep("travel", [turn("[action] What do you need from the hotel?",
                              "For the hotel, I want parking: yes.", revealed_facts=["hotel.parking"],
                              new_facts=["hotel.parking"]),
                         turn(f"[answer] {option}", "Recommend one option by its id from a search "
                              "result, e.g. [answer] H3.", answered=True)],
              prompt="I need a hotel in Osaka.\nAs long as my preferences are satisfied, I would "
                     "like the cheapest option for each.")


def travel_searching() -> dict:
    return ep("travel", [turn("[search] hotel Osaka", "H1 | Vista | Osaka | parking: yes | $120"),
                         turn("[answer] H1", "The user accepts H1.", answered=True)],
              prompt="I need a hotel in Osaka.", success=True, truncated=False)


def tau_unidentified() -> dict:
    """Asks, lists the tools, then cancels an order without ever finding the user."""
    cancel = {"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no"},
              "result": "the request was not what the user wanted", "error": None}
    return ep("tau", [turn("[action] Could you tell me more about your problem with this order?",
                           "I'm not sure; could you ask about something more specific?"),
                      turn("[search] tools", '[{"name": "find_user_id_by_name_zip"}]'),
                      turn('[answer] {"name": "cancel_pending_order", "arguments": {"order_id": '
                           '"#W1", "reason": "no"}}', "Tool result: the request was not what the "
                           "user wanted.", answered=True, tool_calls=[cancel])],
              prompt="Here is my request: Hi, I have a problem with an order.", truncated=False)


def tau_asking_again(step: int | None = None) -> dict:
    """TauGym's first training task as the H100 runs of 2026-12-07 played it: asked for name and
    zip code at once, the user (one fact a reply, the name the better match) says its name to
    every asking, and the zip code never comes."""
    ask = "[action] I can help with that. Could you tell me your first name, last name and zip code?"
    name = "My name is Maria Rossi."

    def asking(new: bool) -> dict:
        return turn(ask, name, revealed_facts=["name"], new_facts=["name"] if new else [],
                    asked_facts=["name", "zip"], rule_id="answer-matched", user_replied=True,
                    repeated=not new)
    return ep("tau", [asking(True), turn("[search] tools", '[{"name": "find_user_id_by_name_zip"}]',
                                         user_replied=False),
                      asking(False), asking(False)],
              prompt="Here is my request: Hi, I have a problem with an order.", task="tau-train-0000",
              step=step)


def tau_identified() -> dict:
    find = {"name": "find_user_id_by_name_zip", "arguments": {}, "result": "mei_patel_1", "error": None}
    look = {"name": "get_user_details", "arguments": {}, "result": {"orders": ["#W1"]}, "error": None}
    return ep("tau", [turn('[answer] {"name": "find_user_id_by_name_zip"}', "Tool result: mei_patel_1",
                           answered=True, tool_calls=[find]),
                      turn('[answer] {"name": "get_user_details"}', "Tool result: {}", answered=True,
                           tool_calls=[look])], prompt="Here is my request: Hi.")


def colbench_chatting(i: int = 0) -> dict:
    """Asks questions to the end of its turns and never writes I WANT TO ANSWER:."""
    return ep("colbench", [turn(f"What should the function return for input {i}?", "A list."),
                           turn("Should it handle empty input?", "Yes."),
                           turn("Anything else?", "No.")],
              prompt="Write a Python function `tally(xs)`.")


def retail_write_first() -> dict:
    write = {"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}, "result": "{}",
             "error": False, "requestor": "assistant"}
    return ep("retail", [turn('<tool_call>{"name": "cancel_pending_order", "arguments": '
                              '{"order_id": "#W1"}}</tool_call>', "TOOL RESULT (cancel_pending_order): {}",
                              answered=True, tool_calls=[write])], prompt="", truncated=False)


def retail_read_first() -> dict:
    read = {"name": "get_order_details", "arguments": {"order_id": "#W1"}, "result": "{}",
            "error": False, "requestor": "assistant"}
    write = {"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}, "result": "{}",
             "error": False, "requestor": "assistant"}
    return ep("retail", [turn('<tool_call>{"name": "get_order_details"}</tool_call>', "TOOL RESULT",
                              tool_calls=[read]),
                         turn('<tool_call>{"name": "cancel_pending_order"}</tool_call>', "TOOL RESULT",
                              answered=True, tool_calls=[write])], truncated=False)


def function_guess(answer: str = "[answer] 7 2 0 10") -> dict:
    """Answers at its first turn: no probe, no test case, no hint."""
    return ep("function", [turn(answer, "Incorrect.", answered=True)], truncated=False,
              prompt="My mapping function is settled and ready. Probe it with [action] and four "
                     "integers, get the test case with [search] test, then [answer] the output.")


SURFACE = ("Title: Two Bodies\nSurface: Two bodies lie on the floor of a room in the museum, in a "
           "puddle of water among broken glass. Riley is shocked.\nTry to uncover the hidden narrative "
           "behind the surface, revealing the twist or true meaning of the story!")


def turtle_restating() -> dict:
    return ep("turtle", [turn("[action] Two bodies lie on the floor of the museum room, in water "
                              "among broken glass?", "Irrelevant."),
                         turn("[action] Riley is shocked by the two bodies on the museum floor?",
                              "Yes."),
                         turn("[action] Were they fish?", "Yes.", revealed_facts=["fish"],
                              new_facts=["fish"])], prompt=SURFACE)


def farmed_travel(step: int, pay: float = 0.2) -> dict:
    """The CPU demo's step-7 pattern: one question asked three times, a module paying each time."""
    q = "[action] What do you need from the hotel?"
    return ep("travel", [turn(q, "For the hotel, I want parking: yes.", revealed_facts=["hotel.parking"],
                              new_facts=["hotel.parking"], module_rewards={"elicited_fact": pay}),
                         turn(q, "For the hotel, I want parking: yes.", revealed_facts=["hotel.parking"],
                              repeated=True, module_rewards={"elicited_fact": pay}),
                         turn(q, "For the hotel, I want parking: yes.", revealed_facts=["hotel.parking"],
                              repeated=True, module_rewards={"elicited_fact": pay})],
              prompt="I need a hotel in Osaka.", step=step)


def honest_travel(step: int, pay: float = 0.2) -> dict:
    return ep("travel", [turn("[action] Do you need parking at the hotel?", "For the hotel, I want "
                              "parking: yes.", revealed_facts=["hotel.parking"],
                              new_facts=["hotel.parking"], module_rewards={"elicited_fact": pay}),
                         turn("[action] Do you want a pool?", "For the hotel, I want pool: no.",
                              revealed_facts=["hotel.pool"], new_facts=["hotel.pool"],
                              module_rewards={"elicited_fact": pay})], step=step)


def write_steps(run_dir, by_step: dict[int, list[dict]]) -> None:
    """trajectories/step-NNNNNN.jsonl for each step's episodes."""
    folder = run_dir / "trajectories"
    folder.mkdir(parents=True, exist_ok=True)
    for step, eps in by_step.items():
        (folder / f"step-{step:06d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))


def function_bad_probes() -> dict:
    """Right tag, wrong arguments: probes of two integers, each rejected by the gym, then one
    well-formed probe and the test case (the record marks the step a rejected call was on,
    training/rollout.py)."""
    bad = "A probe needs exactly four integers."
    return ep("function", [turn("[action] 7 9", bad, rejected="probe"),
                           turn("[action] 8 9", bad, rejected="probe"),
                           turn("[action] 1 2 3 4", "Output for 1 2 3 4: 10"),
                           turn("[search] test", "Test case: 2 0 1 5")],
              prompt="My mapping function is settled and ready.")


def tau_wrong_tool() -> dict:
    """Asks name and zip, then calls a tool that does not exist; written before the gym marked
    rejected calls, so only the tool call's error says so."""
    err = "unknown tool 'get_user_details_33950' or wrong arguments"
    call = {"name": "get_user_details_33950", "arguments": {"user_id": "x"}, "result": None, "error": err}
    return ep("tau", [turn("[action] What is your full name?", "My name is Chen Berg."),
                      turn("[action] And your zip code?", "My zip code is 33950."),
                      turn('[answer] {"name": "get_user_details_33950", "arguments": {"user_id": "x"}}',
                           f"Error: {err}.", answered=True, tool_calls=[call])],
              prompt="Here is my request: something is wrong with my order.")


def tau_calling(first: str, last: str, zip_code: str, told=("Lena", "Khan", "94402")) -> dict:
    """Asks for name and zip code, is told the user's (`told`), lists the tools and calls
    find_user_id_by_name_zip with first/last/zip_code: the user's own facts identify the user,
    other values (the shown example's Ana Souza, as 69 of 91 calling episodes of the H100 runs of
    2026-12-07 wrote) find nobody."""
    user = f"My name is {told[0]} {told[1]}. My zip code is {told[2]}."
    own = (first, last, zip_code) == tuple(told)
    args = {"first_name": first, "last_name": last, "zip": zip_code}
    result = f"{told[0].lower()}_{told[1].lower()}_5923" if own else "Error: user not found"
    call = {"name": "find_user_id_by_name_zip", "arguments": args, "result": result,
            "error": None if own else result}
    return ep("tau", [turn("[action] I can help with that. Could you tell me your first name, last "
                           "name and zip code?", user, revealed_facts=["name", "zip"],
                           new_facts=["name", "zip"]),
                      turn("[search] tools", '[{"name": "find_user_id_by_name_zip"}]'),
                      turn('[answer] {"name": "find_user_id_by_name_zip", "arguments": '
                           + json.dumps(args) + "}", f'Tool result: "{result}"',
                           tool_calls=[call])],
              prompt="Here is my request: Hello, I want to cancel an order.")
