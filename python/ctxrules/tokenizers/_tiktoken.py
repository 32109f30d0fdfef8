"""Build ``tiktoken.Encoding`` objects offline from the ranks bundled in ``_core``.

The pattern strings and special tokens are facts from tiktoken's published encoding
definitions (``tiktoken_ext/openai_public.py`` of tiktoken 0.14, the version we pin;
``tests/tokenizers/test_tokenizers.py`` compares them with the installed tiktoken's own, without
downloading).  The mergeable ranks are the very bytes the Rust core counts with, and
equal the official rank files (the test checks their published sha256).
"""

from __future__ import annotations

import functools

from .. import _core
from ..errors import TokenizerError

_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

_SPECS = {
    "o200k_base": (
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": (
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


@functools.cache
def build_encoding(name: str):  # type: ignore[no-untyped-def]
    """Return a ``tiktoken.Encoding`` for ``name`` built with no network access."""
    # deferred: tiktoken (the oracle) loads its own ranks, tens of ms, only when asked for
    import tiktoken

    if name not in _SPECS:
        raise TokenizerError(f"unknown encoding {name!r}", hint=f"known: {', '.join(_SPECS)}")
    pat_str, special = _SPECS[name]
    ranks = {token: rank for rank, token in enumerate(_core.encoding_ranks(name))}
    return tiktoken.Encoding(
        f"ctxrules-{name}", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special
    )
