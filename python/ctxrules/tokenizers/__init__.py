"""Token counting: exact BPE counts in Rust, tiktoken as an oracle.

Counting policy lives here (the Rust core receives clean ``str``): a Python ``str``
may hold lone surrogates, which are not UTF-8; exactly like tiktoken we round-trip such
a text through UTF-16 with ``surrogatepass`` and decode with ``replace``, so each lone
surrogate becomes U+FFFD (and a surrogate *pair* spelt as two code points becomes the
character it encodes).  Such text therefore counts the same here and in tiktoken.

Tokenizers are a plugin kind: ``register_tokenizers`` hooks register objects with a
``name`` and ``count``/``count_batch`` (see :class:`Tokenizer`).  Which tokenizer
counts a model, and with which calibration, is a fact about the model:
``ctxrules.providers.resolve_model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .. import _core
from ..errors import TokenizerError

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "CacheStats",
    "RustTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "cache_stats",
    "clean_text",
    "clear_cache",
    "count",
    "count_batch",
    "get_tokenizer",
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
    """Return ``text`` with lone surrogates replaced by U+FFFD (valid UTF-8 from then on).

    The same transformation tiktoken applies before encoding; a text that is already
    valid UTF-8 is returned as it is.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _not_str(texts: Sequence[object]) -> TokenizerError:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            return TokenizerError(
                f"cannot count a {type(t).__name__}: texts must be str",
                where=f"texts[{i}]",
                hint="decode bytes first (e.g. data.decode('utf-8'))",
            )
    return TokenizerError("texts must be a sequence of str")


class RustTokenizer:
    """Exact counts from the Rust core (rank data bundled), with a content-hash cache.

    ``cached=True`` (the default) means a text counted before is looked up by its
    xxh3-128 hash instead of being tokenised again; that is what makes re-rendering
    cheap.  ``cached=False`` always tokenises (and leaves the cache alone).  Counts are
    identical either way, and identical to tiktoken's ``encode_ordinary``.
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
        return _core_count(self.encoding, text, self.cached)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts of many texts in one crossing, with the GIL released (on all cores
        when they are many bytes)."""
        return _core_count_batch(self.encoding, texts, self.cached)


def _core_count(encoding: str, text: str, cached: bool) -> int:
    """The core's count of ``text`` (``encoding`` one of ``ENCODINGS``)."""
    try:
        return _core.count_tokens(encoding, text, cached)
    except UnicodeEncodeError:
        return _core.count_tokens(encoding, clean_text(text), cached)
    except TypeError:
        raise _not_str([text]) from None
    except ValueError as exc:  # the core refused the encoding
        raise TokenizerError(str(exc), hint=f"known: {', '.join(ENCODINGS)}") from None


def _core_count_batch(encoding: str, texts: Sequence[str], cached: bool) -> list[int]:
    """The core's counts of ``texts``, in one crossing."""
    batch = texts if isinstance(texts, list) else list(texts)
    try:
        return _core.count_tokens_batch(encoding, batch, cached)
    except UnicodeEncodeError:
        clean = [clean_text(t) for t in batch]
        return _core.count_tokens_batch(encoding, clean, cached)
    except TypeError:
        raise _not_str(batch) from None
    except ValueError as exc:  # the core refused the encoding
        raise TokenizerError(str(exc), hint=f"known: {', '.join(ENCODINGS)}") from None


class TiktokenTokenizer:
    """Python ``tiktoken`` built offline from the ranks bundled in the Rust core.

    This is the oracle of the test suite and a user-selectable tokenizer
    (``tiktoken:o200k_base``).  Nothing is downloaded: ranks come from ``_core``, the
    pattern and special tokens from tiktoken's published definitions (``_tiktoken``).
    Special-token text such as ``<|endoftext|>`` is counted as ordinary text.
    """

    def __init__(self, encoding: str):
        if encoding not in ENCODINGS:
            raise TokenizerError(
                f"unknown encoding {encoding!r}", hint=f"known: {', '.join(ENCODINGS)}"
            )
        self.encoding = encoding
        self.name = f"tiktoken:{encoding}"

    @property
    def tiktoken_encoding(self):  # type: ignore[no-untyped-def]
        """The underlying ``tiktoken.Encoding``, built on first use (~0.5 s) and then
        shared by the process (``build_encoding`` is cached), so registering the oracle
        costs nothing until it counts."""
        # deferred: tiktoken (the oracle) loads its own ranks, tens of ms, only when asked for
        from ._tiktoken import build_encoding

        return build_encoding(self.encoding)

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` by tiktoken's ``encode_ordinary``."""
        return len(self.tiktoken_encoding.encode_ordinary(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Counts by tiktoken's ``encode_ordinary_batch``."""
        return [len(t) for t in self.tiktoken_encoding.encode_ordinary_batch(list(texts))]


class CacheStats(NamedTuple):
    """The content cache of the Rust counter: size, counters since the last clear."""

    entries: int
    hits: int
    misses: int
    capacity: int


def cache_stats() -> CacheStats:
    """Entries, hits and misses of the process-wide content cache (all encodings)."""
    return CacheStats(*_core.token_cache_stats())


def clear_cache() -> None:
    """Forget every cached count and reset the hit/miss counters."""
    _core.token_cache_clear()


def get_tokenizer(name: str = DEFAULT_ENCODING) -> Tokenizer:
    """Return the registered tokenizer called ``name`` (e.g. ``o200k_base``).

    Unknown names raise ``PluginError`` listing the known ones.  For the tokenizer of
    a model use ``ctxrules.providers.resolve_model(spec).tokenizer``.
    """
    # deferred: the plugin layer (pluggy, entry points: ~30 ms) only for a lookup; the
    # core's encodings are counted without it (``count``), as ``ctxrules count`` does
    from ..plugins import registry

    tok: Tokenizer = registry("tokenizers").get(name)
    return tok


def count(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Count the tokens of one text with a registered tokenizer.

    The core's encodings (``ENCODINGS``) go straight to the core: the built-in plugin
    always registers them under those names, which no other plugin can take, so the
    registry lookup would find the same counter on every call.
    """
    if encoding in ENCODINGS:
        return _core_count(encoding, text, True)
    return get_tokenizer(encoding).count(text)


def count_batch(texts: Sequence[str], encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Count many texts with a registered tokenizer, in one call (the core's encodings
    without a registry lookup, as ``count``)."""
    if encoding in ENCODINGS:
        return _core_count_batch(encoding, texts, True)
    return get_tokenizer(encoding).count_batch(texts)
