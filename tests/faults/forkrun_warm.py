"""Imported by forkrun's fork server alone (its preload list): what a trainer start imports
lazily from transformers (the Llama model and config, the auto classes, the fast tokenizer: 3.1 s
of a 4.1 s restart, cProfile of training.trainer.main resuming the toy run), imported once there
rather than by each forked trainer."""
import transformers.models.llama.modeling_llama  # noqa: F401
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: F401
from transformers import PreTrainedTokenizerFast  # noqa: F401

AutoConfig.for_model("llama")
