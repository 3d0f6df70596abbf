"""The sign of InfoPO's information gain (training/infogain.py), with a byte tokenizer and a
policy whose one habit is known: it says "7" readily once "7" is in its context. The other gain
tests check magnitudes (a reply replaced by itself gains 0, another reply does not); this one
checks the direction: a reply that moves the next action toward what it disclosed gains."""
from __future__ import annotations

import contextlib
import math
from types import SimpleNamespace

import pytest
import torch

from training.infogain import information_gain
from training.policy import action_logprobs

FACT = "The code is 7."
PLACEHOLDER = "No information found."
SHIFT = math.log(math.exp(6) / (math.exp(6) + 255)) - math.log(1 / 256)    # 5.055: log p("7") moved


class ByteTokenizer:
    """One token per byte; decode(encode(text)) == text, as the counterfactual's re-encoding needs."""
    pad_token_id = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode())

    def decode(self, ids, **_) -> str:
        return bytes(ids).decode()


class ReadsSevens(torch.nn.Module):
    """hidden (B, T, 2) = [a "7" at or before t, 1]; the head gives the byte "7" the logit 6
    where the context holds a "7" and 0 elsewhere, every other byte 0: p("7") is
    e^6 / (e^6 + 255) after a "7" and 1/256 before one."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(2, 256, bias=False)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.weight[ord("7"), 0] = 6.0

    def get_decoder(self):
        def decoder(input_ids, attention_mask, use_cache):
            seen = (input_ids == ord("7")).cumsum(1).clamp(max=1).float()           # (B, T)
            return SimpleNamespace(last_hidden_state=torch.stack(
                [seen, torch.ones_like(seen)], -1))                                  # (B, T, 2)
        return decoder

    def get_output_embeddings(self):
        return self.head


def gain_of_turn_0(reply: str, placeholder: str) -> float:
    """The gain credited to turn 0 of "What is the code?" -> `reply` -> "7" (the next action),
    measured as the trainer measures it: the episode's own log-probs, then the counterfactual."""
    tok, model = ByteTokenizer(), ReadsSevens()
    pieces = [("Guess the code.\n", -1), ("What is the code?", 0), (f"\nuser: {reply}\nagent: ", -1),
              ("7", 1)]
    ids, turn_ids = [], []
    for text, turn in pieces:
        ids += tok.encode(text)
        turn_ids += [turn] * len(tok.encode(text))
    input_ids = torch.tensor([ids])                                                   # (1, T)
    turns = torch.tensor([turn_ids])                                                  # (1, T)
    with_lp, _ = action_logprobs(model, input_ids, torch.ones_like(input_ids),
                                 (turns >= 0).long(), temperature=1.0)               # (1, T)
    models = SimpleNamespace(tokenizer=tok, rollout_policy=None, policy=model,
                             device=torch.device("cpu"), autocast=contextlib.nullcontext)
    gain, has, skipped = information_gain(
        models, input_ids, turns, torch.tensor([len(ids)]), with_lp, [[reply, ""]], 2,
        placeholder=placeholder, temperature=1.0, micro=4)
    assert has.tolist() == [[1.0, 0.0]] and skipped == 0
    return float(gain[0, 0])


def test_a_reply_that_leads_to_the_next_action_gains_and_one_that_hides_it_loses():
    # the reply disclosed "7" and the agent then said "7"
    assert gain_of_turn_0(FACT, PLACEHOLDER) == pytest.approx(SHIFT, abs=1e-4)
    # the mirror: the reply said nothing, and the placeholder would have led to "7"
    assert gain_of_turn_0(PLACEHOLDER, FACT) == pytest.approx(-SHIFT, abs=1e-4)
    # a reply that changes nothing the next action depends on gains nothing
    assert gain_of_turn_0("Nothing to say.", PLACEHOLDER) == pytest.approx(0.0, abs=1e-6)
