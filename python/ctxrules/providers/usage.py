"""``Usage``: one request's token usage in neutral terms, as every provider reads it."""

from __future__ import annotations

import msgspec

__all__ = ["Usage"]


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """One request's token usage in neutral terms.

    ``input_tokens`` is the uncached remainder of the prompt (Anthropic's meaning), so
    ``prompt_tokens`` = input + cache read + cache write on every vendor.
    ``output_tokens`` includes reasoning tokens where the vendor bills them as output.

    ``compaction`` is the vendor's own compaction step run inside this request, when
    it reported one apart (Anthropic's ``usage.iterations`` of type ``compaction``,
    summed): billed on top of the counts above, which are those of the answer itself,
    read from the compacted prompt (the one the next request carries).  Its prompt is
    the request as it was sent, before compaction, plus the vendor's summarising
    instructions.
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    compaction: Usage | None = None

    @property
    def prompt_tokens(self) -> int:
        """The billed prompt size: what the model actually read."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
