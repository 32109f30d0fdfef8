"""Token counting: exact BPE counts in Rust, tiktoken as an oracle, model resolution.

Counting policy lives here (the Rust core receives clean ``str``): a Python ``str``
may hold lone surrogates, which are not UTF-8; like tiktoken we replace each with
U+FFFD before counting, so such text counts the same here and in tiktoken.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .. import _core
from ..errors import TokenizerError

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "ModelTokenizer",
    "RustTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "clean_text",
    "count",
    "count_batch",
    "get_tokenizer",
    "resolve_model",
]

DEFAULT_ENCODING = "o200k_base"
ENCODINGS: tuple[str, ...] = tuple(_core.ENCODINGS)


@runtime_checkable
class Tokenizer(Protocol):
    """What a tokenizer plugin registers: a name and exact counts for text."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens)."""
        ...

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts of many texts, in order; one call for the whole batch."""
        ...


def clean_text(text: str) -> str:
    """Return ``text`` with lone surrogates replaced by U+FFFD (valid UTF-8 from then on)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean_all(texts: Sequence[str]) -> list[str]:
    return [clean_text(t) for t in texts]


class RustTokenizer:
    """Exact counts from the Rust core (rank data bundled), with a content-hash cache.

    ``cached=True`` (the default) means a text counted before is looked up by its hash
    instead of being tokenised again; that is what makes re-rendering cheap.
    """

    def __init__(self, encoding: str, *, cached: bool = True):
        if encoding not in ENCODINGS:
            raise TokenizerError(
                f"unknown encoding {encoding!r}", hint=f"known: {', '.join(ENCODINGS)}"
            )
        self.encoding = encoding
        self.name = encoding
        self.cached = cached

    def count(self, text: str) -> int:
        """Number of tokens of ``text``; lone surrogates count as U+FFFD."""
        try:
            return _core.count_tokens(self.encoding, text, self.cached)
        except UnicodeEncodeError:
            return _core.count_tokens(self.encoding, clean_text(text), self.cached)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts of many texts in one crossing, on all cores, with the GIL released."""
        batch = texts if isinstance(texts, list) else list(texts)
        try:
            return _core.count_tokens_batch(self.encoding, batch, self.cached)
        except UnicodeEncodeError:
            return _core.count_tokens_batch(self.encoding, _clean_all(batch), self.cached)


class TiktokenTokenizer:
    """Python ``tiktoken`` built offline from the ranks bundled in the Rust core.

    This is the oracle of the test suite and a user-selectable tokenizer
    (``tiktoken:o200k_base``).  Nothing is downloaded: ranks, pattern and special
    tokens all come from this package.
    """

    def __init__(self, encoding: str):
        from ._tiktoken import build_encoding

        self.encoding = encoding
        self.name = f"tiktoken:{encoding}"
        self._enc = build_encoding(encoding)

    @property
    def tiktoken_encoding(self):  # type: ignore[no-untyped-def]
        """The underlying ``tiktoken.Encoding``."""
        return self._enc

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` by tiktoken's ``encode_ordinary``."""
        return len(self._enc.encode_ordinary(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts by tiktoken's ``encode_ordinary_batch``."""
        return [len(t) for t in self._enc.encode_ordinary_batch(list(texts))]


@dataclass(frozen=True)
class ModelTokenizer:
    """Maps ``"provider:model"`` patterns (fnmatch) to a tokenizer and calibration factor.

    A vendor whose tokenizer is not public (Anthropic) is served by an estimate: the
    count of ``tokenizer`` multiplied by ``calibration``.  ``name`` must be unique.
    """

    name: str
    pattern: str
    tokenizer: str
    calibration: float = 1.0


def get_tokenizer(name: str = DEFAULT_ENCODING) -> Tokenizer:
    """Return the registered tokenizer called ``name`` (e.g. ``o200k_base``)."""
    from ..plugins import registry

    tok = registry("tokenizers").get(name)
    if isinstance(tok, ModelTokenizer):
        raise TokenizerError(f"{name!r} is a model mapping, not a tokenizer")
    return tok


def resolve_model(model: str) -> tuple[Tokenizer, float]:
    """Resolve ``"provider:model"`` to (tokenizer, calibration); the first matching mapping wins.

    A model that no mapping names gets the default encoding with calibration 1.0.
    """
    from ..plugins import registry

    for obj in registry("tokenizers").items.values():
        if isinstance(obj, ModelTokenizer) and fnmatch.fnmatchcase(model, obj.pattern):
            return get_tokenizer(obj.tokenizer), obj.calibration
    return get_tokenizer(DEFAULT_ENCODING), 1.0


def count(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Count the tokens of one text with a registered tokenizer."""
    return get_tokenizer(encoding).count(text)


def count_batch(texts: Sequence[str], encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Count many texts with a registered tokenizer, in one call."""
    return get_tokenizer(encoding).count_batch(texts)
