"""The KV engine (training/kvengine.py): sequences keep their cache across calls, and a call runs
only the tokens past what a slot holds, with the same tokens as transformers' `generate`.

Greedy comparisons run in fp32 on a random Llama whose greedy continuations vary (init 0.3, as in
test_generation.py); the CUDA-graph path is the gpu-marked test at the end.
"""
from __future__ import annotations

import pytest
import torch

from training.generation import GenerationConfigError, make_generator
from training.kvengine import KVEngine, rollout_engine


def _model(dtype=torch.float32, device="cpu"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3,
                      pad_token_id=0, eos_token_id=1)
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()


class Tok:
    pad_token_id = 0
    eos_token_id = 1


def _rand(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, 300, (n,), generator=g).tolist()


def _engine(model, **kw):
    return KVEngine(model, slots=kw.pop("slots", 2), stop_ids=kw.pop("stop_ids", [1]), pad_id=0,
                    width_bucket=kw.pop("width_bucket", 16), **kw)


def _forward_widths(engine, monkeypatch):
    """The query width of every decoder forward the engine makes."""
    widths = []
    forward = engine.decoder.forward

    def spy(*args, **kw):
        widths.append(kw["input_ids"].shape[1])
        return forward(*args, **kw)

    monkeypatch.setattr(engine.decoder, "forward", spy)
    return widths


def _conversation(turns=4, lengths=(5, 40, 17)):
    """Contexts of a multi-turn exchange: each turn appends the previous answer and a reply."""
    return [_rand(n, 100 + i) for i, n in enumerate(lengths)], [
        [_rand(3 + 5 * i + t, 200 + 10 * i + t) for i in range(len(lengths))]
        for t in range(turns)]


def test_turns_greedy_equal_plain_generate_and_run_only_the_new_tokens(monkeypatch):
    """Four turns of three sequences, each turn's context the last one plus its answer plus a
    reply: the engine's greedy tokens equal transformers' `generate` on the whole contexts,
    and after the first turn each forward runs at most the longest appended part, never the
    history again."""
    model = _model()
    plain = make_generator(_model(), Tok, "plain")
    engine = _engine(model, slots=3, prefill_chunk=7)
    widths = _forward_widths(engine, monkeypatch)
    contexts, replies = _conversation()
    for t, reply in enumerate(replies):
        before = len(widths)
        mine = engine.generate(contexts, max_new_tokens=12, greedy=True)
        theirs = plain.generate(contexts, 12, greedy=True, stop_ids=[1])
        assert mine == theirs, t
        prefill = [w for w in widths[before:] if w > 1]
        if t == 0:
            assert max(prefill) == 7                          # the prompts, in 7-token chunks
        else:      # the last answer's final token, then the reply: nothing older
            assert max(prefill, default=1) <= 1 + max(len(r) for r in reply)
        contexts = [c + m + r for c, m, r in zip(contexts, mine, reply)]
    assert len({tuple(c) for c in contexts}) == 3


def test_stop_ids_min_new_and_max_new_like_plain():
    """Stop ids end a sequence after the first one (kept), min_new_tokens bars them until then,
    and max_new_tokens cuts the rest; each as transformers does."""
    model = _model()
    plain = make_generator(_model(), Tok, "plain")
    prompts = [_rand(n, 7 + n) for n in (3, 9, 14, 1)]
    free = plain.generate(prompts, 20, greedy=True)
    stop = next(t for row in free for t in row[2:])          # a token greedy decoding writes
    engine = _engine(model, slots=4, stop_ids=[stop])
    mine = engine.generate(prompts, max_new_tokens=20, greedy=True)
    assert mine == plain.generate(prompts, 20, greedy=True, stop_ids=[stop])
    assert any(row and row[-1] == stop and len(row) < 20 for row in mine)
    late = engine.generate(prompts, max_new_tokens=20, greedy=True, min_new_tokens=8)
    assert all(stop not in row[:8] for row in late)
    assert all(len(r) <= 3 for r in engine.generate(prompts, max_new_tokens=3, greedy=True))


def test_a_slot_is_reused_only_for_its_own_prefix_and_gives_the_same_tokens(monkeypatch):
    """A context that extends what a slot holds reuses it; a shorter context whose tokens a slot
    holds reuses it too (columns past it are dropped); an unrelated one takes the least recently
    used slot. Every answer equals a fresh engine's."""
    model = _model()
    engine = _engine(model, slots=3)
    a, b = _rand(30, 1), _rand(20, 2)
    first = engine.generate([a, b], max_new_tokens=6, greedy=True)
    widths = _forward_widths(engine, monkeypatch)
    longer = a + first[0] + [5, 6, 7]
    shorter = b[:12]
    again = engine.generate([longer, shorter], max_new_tokens=6, greedy=True)
    assert max(widths[:1]) <= 1 + 3                           # only the appended tokens of a
    fresh = _engine(_model(), slots=2).generate([longer, shorter], max_new_tokens=6, greedy=True)
    assert again == fresh
    other = _rand(25, 3)
    assert engine.generate([other], max_new_tokens=6, greedy=True) == \
        _engine(_model(), slots=1).generate([other], max_new_tokens=6, greedy=True)
    # a context that leaves a slot's tokens part way (a reply tokenized otherwise than sampled)
    # keeps the shared part: only the tokens after it are run
    diverged = longer[:25] + [11, 12, 13, 14]
    before = len(widths)
    kept = engine.generate([diverged], max_new_tokens=6, greedy=True)
    assert max(w for w in widths[before:] if w > 1) == 4
    assert kept == _engine(_model(), slots=1).generate([diverged], max_new_tokens=6, greedy=True)


def test_changed_weights_forget_every_cache():
    """A cache is only valid for the weights that computed it: after an in-place change of the
    weights (an optimiser step) the next call prefills everything again and matches a fresh
    engine on the changed model."""
    model = _model()
    engine = _engine(model, slots=1)
    ctx = _rand(24, 4)
    out = engine.generate([ctx], max_new_tokens=5, greedy=True)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.3)
    follow = ctx + out[0] + [9, 9]
    changed = _model()
    with torch.no_grad():
        for p in changed.parameters():
            p.mul_(1.3)
    assert engine.generate([follow], max_new_tokens=5, greedy=True) == \
        _engine(changed, slots=1).generate([follow], max_new_tokens=5, greedy=True)


def test_more_contexts_than_slots_grow_the_engine_and_sampling_repeats():
    model = _model()
    engine, other, third = _engine(model, slots=1), _engine(_model(), slots=3), \
        _engine(_model(), slots=3)
    prompts = [_rand(n, 40 + n) for n in (4, 11, 6)]
    torch.manual_seed(5)
    a = engine.generate(prompts, max_new_tokens=10, temperature=1.0)
    assert engine.slots == 3 and len(a) == 3
    torch.manual_seed(5)
    assert other.generate(prompts, max_new_tokens=10, temperature=1.0) == a   # same draws
    torch.manual_seed(6)
    assert third.generate(prompts, max_new_tokens=10, temperature=1.0) != a
    # temperature 0 and a vanishing nucleus are both greedy
    greedy = _engine(_model(), slots=3).generate(prompts, max_new_tokens=10, greedy=True)
    assert _engine(_model(), slots=3).generate(prompts, max_new_tokens=10, temperature=0.0) == greedy
    assert _engine(_model(), slots=3).generate(prompts, max_new_tokens=10, temperature=1.0,
                                               top_p=1e-6) == greedy


def test_bad_calls_are_refused_in_one_sentence():
    model = _model()
    engine = _engine(model)
    with pytest.raises(GenerationConfigError, match="at least one token"):
        engine.generate([[]], max_new_tokens=3)
    assert engine.generate([[5]], max_new_tokens=0) == [[]]
    with pytest.raises(GenerationConfigError, match="at most 8 stop ids"):
        _engine(model, stop_ids=list(range(9)))


def test_a_cache_the_host_cannot_hold_is_refused_in_one_sentence(monkeypatch):
    """On the CPU a cache that would not fit the free memory is refused before it is allocated
    (the kernel's OOM killer once ended a 105-episode evaluation with nothing said); as many
    sequences as fit still generate."""
    import training.kvengine as K

    per_slot = 2 * 2 * 2 * 64 * 16 * 4      # keys and values, 2 layers, 2 heads, 64 columns, fp32
    monkeypatch.setattr(K, "_free_host_bytes", lambda: int(2.5 * per_slot / K.HOST_SHARE))
    prompts = [_rand(n, 70 + n) for n in (5, 9, 7)]
    with pytest.raises(K.KVCacheMemoryError, match=r"^the KV cache for 3 sequences of 64 tokens "
                       r"needs .* GiB and this machine has .* GiB free: generate fewer sequences "
                       r"at once \(a smaller batch size\)\.$"):
        _engine(_model(), slots=1, grow_by=64).generate(prompts, max_new_tokens=4, greedy=True)
    two = _engine(_model(), slots=1, grow_by=64)
    assert len(two.generate(prompts[:2], max_new_tokens=4, greedy=True)) == 2
    assert two.kv_bytes == 2 * per_slot
    monkeypatch.setattr(K, "_free_host_bytes", lambda: None)     # no /proc/meminfo: no check
    three = _engine(_model(), slots=1, grow_by=64)
    assert len(three.generate(prompts, max_new_tokens=4, greedy=True)) == 3


def test_training_passes_on_the_same_model_are_unchanged():
    """The engine switches the model's attention to its own; a forward outside the engine (the
    update's training passes, on the CPU the very same model) still runs SDPA: same logits."""
    model, plain = _model(), _model()
    _engine(model).generate([_rand(9, 1)], max_new_tokens=3, greedy=True)
    ids = torch.tensor([_rand(12, 2), _rand(12, 3)])
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits,
                               plain(input_ids=ids, attention_mask=mask).logits)


def test_rollout_engine_follows_the_policy_weights():
    """The trainer's engine (policy.generate's "kv" backend) decodes the live weights: after an
    update the same context gives what a fresh engine on the updated weights gives."""
    model = _model()
    entry = rollout_engine(model, Tok, [1])
    ctx = [_rand(10, 8)]
    entry.engine.generate(ctx, max_new_tokens=4, greedy=True)
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(2.0)
    again = rollout_engine(model, Tok, [1])
    assert again is entry
    changed = _model()
    with torch.no_grad():
        changed.model.layers[0].mlp.up_proj.weight.mul_(2.0)
    assert again.engine.generate(ctx, max_new_tokens=4, greedy=True) == \
        _engine(changed, slots=1).generate(ctx, max_new_tokens=4, greedy=True)


def _hf_penalised(model, contexts, max_new, penalty, device="cpu"):
    """transformers' greedy tokens with the reply-only penalty as its logits processor, one
    unpadded context at a time, cut after the first stop id (1) as the engine cuts them."""
    from transformers import LogitsProcessorList

    from training.generation import ReplyRepetitionPenalty
    out = []
    for c in contexts:
        ids = model.generate(torch.tensor([c], device=device), max_new_tokens=max_new,
                             do_sample=False, eos_token_id=1, pad_token_id=0,
                             logits_processor=LogitsProcessorList(
                                 [ReplyRepetitionPenalty(penalty, len(c))]))[0, len(c):].tolist()
        out.append(ids[:ids.index(1) + 1] if 1 in ids else ids)
    return out


def test_the_reply_penalty_is_transformers_on_the_new_tokens_alone():
    """ReplyRepetitionPenalty: transformers' repetition penalty, on the columns past the prompt."""
    from transformers import RepetitionPenaltyLogitsProcessor

    from training.generation import ReplyRepetitionPenalty
    ids = torch.tensor([[5, 6, 7, 8, 6], [9, 9, 5, 7, 7]])
    scores = torch.randn(2, 12, generator=torch.Generator().manual_seed(0)) * 3
    mine = ReplyRepetitionPenalty(1.7, 3)(ids, scores.clone())
    assert torch.equal(mine, RepetitionPenaltyLogitsProcessor(1.7)(ids[:, 3:], scores.clone()))
    assert torch.equal(ReplyRepetitionPenalty(1.7, 5)(ids, scores.clone()), scores)   # no reply yet


def test_a_repetition_penalty_gives_transformers_tokens_over_turns_and_then_goes():
    """An LLM user's `user.<gym>.repetition_penalty`: the tokens each reply has said are
    penalised (not its context), over reused slots, as transformers' generate with the same
    processor; a call without one afterwards decodes as if none had been asked."""
    model = _model()
    engine = _engine(model, slots=3)
    contexts, replies = _conversation(turns=2)
    plain_first = engine.generate(contexts, max_new_tokens=16, greedy=True)
    for t, reply in enumerate(replies):
        mine = engine.generate(contexts, max_new_tokens=16, greedy=True, repetition_penalty=1.8)
        assert mine == _hf_penalised(model, contexts, 16, 1.8), t
        if t == 0:
            assert mine != plain_first          # the penalty changed what greedy decoding says
        contexts = [c + m + r for c, m, r in zip(contexts, mine, reply)]
    engine.forget()
    first = [c[:len(c0)] for c, c0 in zip(contexts, _conversation(turns=2)[0])]
    assert engine.generate(first, max_new_tokens=16, greedy=True) == plain_first
    with pytest.raises(GenerationConfigError, match="must be above 0"):
        engine.generate(first, max_new_tokens=4, repetition_penalty=0.0)


@pytest.mark.gpu
def test_cuda_graph_repetition_penalty_gives_transformers_tokens_on_gpu():
    """The penalty inside the captured decode step: the same greedy tokens as transformers'."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model = _model(device="cuda")
    engine = _engine(model, slots=8)
    assert engine.use_graph
    contexts = [_rand(5 + 3 * i, 500 + i) for i in range(8)]
    mine = engine.generate(contexts, max_new_tokens=24, greedy=True, repetition_penalty=1.8)
    assert mine == _hf_penalised(model, contexts, 24, 1.8, device="cuda")
    assert engine.generate(contexts, max_new_tokens=24, greedy=True) == \
        make_generator(_model(device="cuda"), Tok, "plain").generate(contexts, 24, greedy=True,
                                                                     stop_ids=[1])


@pytest.mark.gpu
def test_cuda_graph_turns_greedy_equal_plain_on_gpu():
    """On CUDA every decode step is a graph replay: the same greedy tokens as plain `generate`
    over four turns (fp32, TF32 off), at a batch of 48."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model = _model(device="cuda")
    plain = make_generator(_model(device="cuda"), Tok, "plain")
    engine = _engine(model, slots=48)
    assert engine.use_graph
    contexts = [_rand(5 + i % 40, 300 + i) for i in range(48)]
    for t in range(4):
        mine = engine.generate(contexts, max_new_tokens=24, greedy=True)
        assert mine == plain.generate(contexts, 24, greedy=True, stop_ids=[1]), t
        contexts = [c + m + _rand(3 + t, 400 + t) for c, m in zip(contexts, mine)]


def test_continuous_rollout_greedy_equals_the_turn_by_turn_rollout(tiny_model_dir, monkeypatch):
    """The rollout through the KV engine (each episode's turns without waiting for the others,
    only new tokens prefilled) writes, under greedy decoding, token for token the episodes of
    the turn-by-turn rollout over transformers' generate: tokens, masks, turn ids and turns.

    The model: a random Llama on SmolLM2's tokenizer (init 0.3, so greedy text varies; untied
    head) whose end-of-turn row is set, from its own hidden states, to win about one position in
    six, so that turns end at different lengths and episodes fall out of step."""
    from pathlib import Path

    from transformers import LlamaConfig, LlamaForCausalLM

    from training import policy, rollout as R
    from training.benches.usergym import BENCH
    from training.snapshot import Snapshot

    tok = policy.load_tokenizer(str(tiny_model_dir))
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3,
        tie_word_embeddings=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    models = policy.Models(policy=m.eval(), critic=None, reference=None, tokenizer=tok,
                           device=torch.device("cpu"), path=str(tiny_model_dir))
    snap = Snapshot.from_dir(Path(__file__).resolve().parents[2] / "workspace")
    tasks = BENCH.load_tasks("train", ["persuade", "function", "turtle", "telepathy"])[:8]

    def episodes():
        out = []
        for i, task in enumerate(tasks):
            demos, n = snap.demos_for("usergym", task.gym)
            out.append(R.start_episode(models, BENCH.make_env(task, snap, seed=i),
                                       BENCH.system_prompt(task), seed=i, demos=demos, n_demos=n))
        return out

    def run(backend):
        monkeypatch.setenv("EAU_ROLLOUT_BACKEND", backend)
        eps = episodes()
        R.rollout(models, eps, max_turns=4, response_length=24, temperature=0.0, top_p=1.0,
                  max_episode_tokens=4096)
        return eps

    with torch.no_grad():     # calibrate the end-of-turn row on the model's own states
        ids = torch.tensor([episodes()[0].tokens])
        h = m.model(input_ids=ids).last_hidden_state[0]                          # (T, H)
        top = (h @ m.lm_head.weight.t()).max(-1).values                          # (T,)
        u = h.mean(0) / h.mean(0).norm()
        ratio = (top / (h @ u))[(h @ u) > 0]
        m.lm_head.weight[policy.end_of_turn_ids(tok)[-1]] = u * torch.quantile(ratio, 0.85)
    runs = {backend: run(backend) for backend in ("plain", "kv")}
    lengths = [sum(ep.mask) for ep in runs["kv"]]
    assert len(set(lengths)) > 3, lengths              # the episodes fell out of step
    for a, b in zip(runs["plain"], runs["kv"]):
        assert (a.tokens, a.mask, a.turn_ids) == (b.tokens, b.mask, b.turn_ids)
        assert [t["agent"] for t in a.turns] == [t["agent"] for t in b.turns]
        assert (a.score, a.success, a.truncated) == (b.score, b.success, b.truncated)


@pytest.mark.parametrize("fused", [False, True])
def test_the_rollout_copy_decodes_the_weights_after_a_trainer_step(fused):
    """On CUDA the engine decodes a bf16 copy of the policy, copied again when the weights' version
    counters move. The trainer's fused AdamW step (its CUDA optimiser) once left them still, and
    every GPU rollout decoded the initial policy. The copy is forced here on the CPU."""
    from types import SimpleNamespace

    from training.kvengine import RolloutEngine
    from training.trainer import Trainer

    model = _model()
    entry = RolloutEngine(model, Tok, [1], copy_weights=True, width_bucket=16)
    ctx = [_rand(10, 8), _rand(7, 9)]
    entry.refresh()
    before = entry.engine.generate(ctx, max_new_tokens=6, greedy=True)
    opt = Trainer._optimizer(model, SimpleNamespace(lr=0.05, betas=(0.9, 0.999), weight_decay=0.0),
                             fused=fused)
    ids = torch.tensor([_rand(12, 10)])
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    model.eval()
    entry.refresh()
    after = entry.engine.generate(ctx, max_new_tokens=6, greedy=True)
    fresh = RolloutEngine(model, Tok, [1], copy_weights=True, width_bucket=16)
    fresh.refresh()
    assert after == fresh.engine.generate(ctx, max_new_tokens=6, greedy=True)
    assert after != before          # the step changed what the policy writes


def test_attention_leaves_compilation_only_once_an_engine_compiles(monkeypatch):
    """A compiled decoder layer breaks its graph at kv_attention, which is registered wrapped by
    torch.compiler.disable from the first compiling engine on; on the CPU nothing compiles, and
    the trainer's start does not pay for importing torch._dynamo (1.2 s of its 2.9 s import)."""
    import subprocess
    import sys

    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from training import kvengine

    probe = subprocess.run([sys.executable, "-c", "import sys, training.trainer; "
                            "print('torch._dynamo' in sys.modules)"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "False"
    monkeypatch.setattr(kvengine, "_EXCLUDED", [])
    kvengine.use_kv_attention(_model())
    assert ALL_ATTENTION_FUNCTIONS[kvengine.ATTN] is kvengine.kv_attention
    excluded = kvengine._compile_excluded_attention()
    assert excluded is not kvengine.kv_attention and kvengine._compile_excluded_attention() is excluded
    kvengine.use_kv_attention(_model())       # a later engine keeps it excluded
    assert ALL_ATTENTION_FUNCTIONS[kvengine.ATTN] is excluded
