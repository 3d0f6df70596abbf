"""User simulators: the symbolic rule engine, LLM users (local transformers, OpenAI-compatible
HTTP) and the per-episode epsilon mixture of the two (paper section 4.2)."""
