"""InfoPO's information gain of a turn: how much the reply a turn drew changed the next turn.

    I_k = mean over the tokens a of turn k+1 of
          log pi(a | context with observation k) - log pi(a | context, observation k -> placeholder)

credited to turn k, whose action drew observation k (InfoPO, Kong et al. 2026, arXiv
2603.00656; github.com/kfq20/InfoPO `verl/trainer/ppo/intrinsic_reward.py`: a reply that does not
move the next action earns nothing, one that redirects it earns its shift). Teacher forcing: turn
k+1's tokens are the ones the policy sampled, and the first term is the step's old log-probs
(training/update.py computes them for every algorithm but skips them for single-update PPO, so
`infopo` always has them), so one extra forward runs per counterfactual, not two.

The counterfactual is built in text: the observation's text inside the chat template's rendering of
the segment between turn k and turn k+1 is replaced by the placeholder and the segment re-encoded,
so the model reads a well-formed reply ("No information found.", InfoPO's default). InfoPO instead
overwrites the observation's tokens in place with the placeholder's, padded by repeating its last
token or cut, to keep positions; ours keeps the template intact and moves turn k+1 instead.
A turn gets no gain (skipped) when it is the episode's last, its observation is empty or cannot be
found in the rendered segment, or turn k or k+1 has no action tokens.

A second difference from InfoPO: both terms are log-probabilities at `temperature`, the rollout's
(rollout.temperature, 0.7 by default), where InfoPO's `compute_batched_kl_divergence` takes the
log-softmax of the raw logits (temperature 1.0). The first term is the step's old log-probs, which
the PPO ratio needs at the sampling temperature; measuring at 1.0 would take one more policy
forward per episode (training/update.py would compute the first term at 1.0 and pass
temperature=1.0 here). info_advantages normalises each group's gains, so a scale they share
cancels; the temperature still changes their relative sizes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from training.packing import pad_right
from training.policy import Models, action_logprobs


@dataclass(frozen=True)
class Counterfactual:
    """Episode `row`'s context up to turn k+1 with observation k replaced, and turn k+1 after it."""
    row: int
    turn: int                 # k: the turn the gain is credited to
    ids: list[int]            # counterfactual context + turn k+1's action tokens
    start: int                # turn k+1's first token in `ids`
    orig_start: int           # ... and in the episode's own sequence
    length: int               # turn k+1's action tokens


def turn_spans(turn_ids: list[int]) -> dict[int, tuple[int, int]]:
    """{turn: (first, last + 1)} of each turn's action tokens (contiguous: one generate call)."""
    spans: dict[int, tuple[int, int]] = {}
    for pos, k in enumerate(turn_ids):
        if k >= 0:
            first = spans.get(k, (pos, pos))[0]
            spans[k] = (first, pos + 1)
    return spans


def counterfactuals(tokenizer, row: int, ids: list[int], turn_ids: list[int],
                    observations: list[str], placeholder: str) -> tuple[list[Counterfactual], int]:
    """(the episode's counterfactual sequences, how many turns with an observation were skipped)."""
    spans = turn_spans(turn_ids)
    out, skipped = [], 0
    for k, obs in enumerate(observations):
        if k + 1 not in spans:                  # the reply ended the episode: no next turn
            continue
        if k not in spans or not obs.strip():
            skipped += 1
            continue
        end_k = spans[k][1]
        start, stop = spans[k + 1]
        segment = tokenizer.decode(ids[end_k:start], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
        at = segment.rfind(obs)
        if at < 0:
            skipped += 1
            continue
        replaced = segment[:at] + placeholder + segment[at + len(obs):]
        context = ids[:end_k] + tokenizer.encode(replaced, add_special_tokens=False)
        out.append(Counterfactual(row=row, turn=k, ids=context + ids[start:stop],
                                  start=len(context), orig_start=start, length=stop - start))
    return out, skipped


@torch.no_grad()
def information_gain(models: Models, input_ids: torch.Tensor, turn_ids: torch.Tensor,
                     lengths: torch.Tensor, with_logprobs: torch.Tensor,
                     observations: list[list[str]], num_turns: int, *, placeholder: str,
                     temperature: float, micro: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """((B, K) gain per turn, (B, K) 1 where a gain was measured, turns skipped).

    input_ids, turn_ids, with_logprobs: (B, T) of the step's episodes (right padded, `lengths`);
    with_logprobs are the old log-probs at `temperature`, which the counterfactual uses too.
    The policy runs unwrapped (the rollout's copy under FSDP): each process measures its own
    episodes, a different number of passes each, so no collective may run here.
    """
    B = input_ids.shape[0]
    gain = torch.zeros(B, num_turns)
    has = torch.zeros(B, num_turns)
    items: list[Counterfactual] = []
    skipped = 0
    for b in range(B):
        n = int(lengths[b])
        found, miss = counterfactuals(models.tokenizer, b, input_ids[b, :n].tolist(),
                                      turn_ids[b, :n].tolist(), observations[b], placeholder)
        items += found
        skipped += miss
    model = models.rollout_policy or models.policy
    pad = models.tokenizer.pad_token_id
    for i in range(0, len(items), micro):
        chunk = items[i:i + micro]
        ids, attn = pad_right([torch.tensor(c.ids) for c in chunk], pad)            # (b, t)
        resp = torch.zeros_like(ids)
        for j, c in enumerate(chunk):
            resp[j, c.start:c.start + c.length] = 1
        with models.autocast():
            lp, _ = action_logprobs(model, ids.to(models.device), attn.to(models.device),
                                    resp.to(models.device), temperature=temperature)
        lp = lp.float().cpu()
        for j, c in enumerate(chunk):
            without = lp[j, c.start:c.start + c.length]
            with_ = with_logprobs[c.row, c.orig_start:c.orig_start + c.length]
            gain[c.row, c.turn] = float((with_ - without).mean())
            has[c.row, c.turn] = 1.0
    return gain, has, skipped
