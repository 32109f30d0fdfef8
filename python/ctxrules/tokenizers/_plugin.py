"""Built-in tokenizers, registered through the ``ctxrules`` entry points like any plugin.

Registers, per encoding, the Rust counter (``o200k_base``, ``cl100k_base``) and the
tiktoken oracle (``tiktoken:o200k_base``, ...), then the model mappings.  A third-party
plugin's mappings are tried before these (see ``ctxrules.tokenizers.model_mappings``).
"""

from __future__ import annotations

from ..hookspecs import Register, hookimpl
from . import ENCODINGS, ModelTokenizer, RustTokenizer, TiktokenTokenizer

# Anthropic does not publish its tokenizer; o200k counts times this factor estimate it.
# Claude tokenises English/code into roughly 10-20 % more tokens than o200k; the factor
# is refined per session by measured usage (SPEC §9 calibration).
ANTHROPIC_CALIBRATION = 1.15


@hookimpl
def register_tokenizers(register: Register) -> None:
    """Register the built-in counters and model mappings (first match wins)."""
    for enc in ENCODINGS:
        register(RustTokenizer(enc))
        register(TiktokenTokenizer(enc))
    register(ModelTokenizer("openai-4o", "openai*:gpt-4o*", "o200k_base"))
    register(ModelTokenizer("openai-o", "openai*:o[0-9]*", "o200k_base"))
    register(ModelTokenizer("openai-gpt5", "openai*:gpt-5*", "o200k_base"))
    # gpt-4.1 / gpt-4.5 / chatgpt-4o use o200k (tiktoken's model table); before gpt-4*.
    register(ModelTokenizer("openai-gpt41", "openai*:gpt-4.[15]*", "o200k_base"))
    register(ModelTokenizer("openai-chatgpt4o", "openai*:chatgpt-4o*", "o200k_base"))
    register(ModelTokenizer("openai-gpt4", "openai*:gpt-4*", "cl100k_base"))
    register(ModelTokenizer("openai-gpt35", "openai*:gpt-3.5*", "cl100k_base"))
    register(ModelTokenizer("openai-embed", "openai*:text-embedding-*", "cl100k_base"))
    register(ModelTokenizer("anthropic", "anthropic:*", "o200k_base", ANTHROPIC_CALIBRATION))
    register(ModelTokenizer("gemini", "gemini:*", "o200k_base", 1.0))
