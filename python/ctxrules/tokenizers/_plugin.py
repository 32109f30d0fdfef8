"""Built-in tokenizers, registered through the ``ctxrules`` entry points like any plugin.

Registers, per encoding, the Rust counter (``o200k_base``, ``cl100k_base``) and the
tiktoken oracle (``tiktoken:o200k_base``, ...).  Which model each counts is model data
(``ctxrules.providers._model_table``).
"""

from __future__ import annotations

from ..hookspecs import RegisterTokenizers, hookimpl
from . import ENCODINGS, RustTokenizer, TiktokenTokenizer


@hookimpl
def register_tokenizers(register: RegisterTokenizers) -> None:
    """Register the built-in counters."""
    for enc in ENCODINGS:
        register(RustTokenizer(enc))
        register(TiktokenTokenizer(enc))
