"""Which part of the training system reads each knob of a workspace's knobs.json.

The write gate refuses a knob new in knobs.json that no entry here declares
(orchestrator/gate_knobs.py): the schema lets an agent add a property, and the trainer would then
carry a value that no code reads, a write that changes nothing while its commit claims an effect.
Code that starts reading a new knob declares it here in the same change.
tests/training/test_knob_readers.py keeps this honest: every declared knob's last name appears
in its reader's source, and every knob of the shipped workspace/knobs.json is declared.

Keys are dotted knob paths; `<gym>` stands for any gym of the benches and `<module>` for any
reward module's name (its file rewards/<module>.py is switched on and weighted by these).
"""
from __future__ import annotations

READERS: dict[str, str] = {
    # the optimiser's live coefficients, applied at each step boundary
    "agent.entropy_coeff": "training/trainer.py",
    "agent.kl_loss_coef": "training/trainer.py",
    "agent.lr_multiplier": "training/trainer.py",
    # every environment's turn limit and its worked examples
    "env.<gym>.max_steps": "training/benches/base.py",
    "env.<gym>.demonstrations": "training/demonstrations.py",
    "env.travel.search_failure_interval": "training/benches/usergym/travel.py",
    "env.travel.elicitation_interval": "training/benches/usergym/travel.py",
    "env.travel.noise_choice_number": "training/benches/usergym/travel.py",
    "env.travel.wrong_choice_number": "training/benches/usergym/travel.py",
    "env.function.max_repeated_probes": "training/benches/usergym/function.py",
    "env.turtle.success_threshold": "training/benches/usergym/turtle.py",
    "env.colbench.min_questions": "training/benches/colbench/env.py",
    "env.colbench.human_response_char_limit": "training/benches/colbench/env.py",
    # the users: the mixture, the LLM user, the symbolic user's rules engine
    "user.<gym>.strategy_mix": "training/users/mixture.py",
    "user.<gym>.temperature": "training/users/llm.py",
    "user.<gym>.repetition_penalty": "training/users/llm.py",
    "user.<gym>.llm": "training/users/llm.py",
    "user.<gym>.facts_per_reply": "training/users/symbolic.py",
    "user.<gym>.match_threshold": "training/users/symbolic.py",
    "user.<gym>.volunteer_interval": "training/users/symbolic.py",
    "user.<gym>.max_reveals": "training/users/symbolic.py",
    "user.<gym>.withhold_kinds": "training/users/symbolic.py",
    # the reward: scales, clip, Function's predicate term, the modules' switches and weights
    "reward.default_scale": "training/rewards.py",
    "reward.per_gym_scale.<gym>": "training/rewards.py",
    "reward.turn_reward_clip.min": "training/rewards.py",
    "reward.turn_reward_clip.max": "training/rewards.py",
    "reward.predicate_weight": "training/benches/usergym/function.py",
    "reward.modules.<module>.enabled": "training/rewards.py",
    "reward.modules.<module>.weight": "training/rewards.py",
}


def _matches(pattern: str, path: str, gyms: tuple[str, ...]) -> bool:
    want, have = pattern.split("."), path.split(".")
    if len(want) != len(have):
        return False
    for w, h in zip(want, have):
        if w == "<gym>":
            if h not in gyms:
                return False
        elif w == "<module>":
            if not h.isidentifier():
                return False
        elif w != h:
            return False
    return True


def reader(path: str, gyms: tuple[str, ...]) -> str | None:
    """The file that reads knob `path` ("env.travel.max_steps"), or None when nothing does."""
    for pattern, where in READERS.items():
        if _matches(pattern, path, gyms):
            return where
    return None


def is_read(path: str, gyms: tuple[str, ...]) -> bool:
    return reader(path, gyms) is not None
