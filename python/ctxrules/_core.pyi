# Hand-written stub of the compiled extension; checked by `python -m mypy.stubtest ctxrules._core`.

from collections.abc import Sequence
from typing import final

from .model import ContextItem

__all__ = [
    "ENCODINGS",
    "MAX_DEPTH",
    "Estimate",
    "EstimateFrame",
    "__version__",
    "count_tokens",
    "count_tokens_batch",
    "diff_items",
    "encoding_ranks",
    "estimate_stats",
    "item_cache_clear",
    "item_cache_stats",
    "render_batch",
    "render_context",
    "render_request",
    "render_sessions",
    "set_item_cache_capacity",
    "token_cache_clear",
    "token_cache_len",
    "token_cache_stats",
]

__version__: str
ENCODINGS: list[str]
#: Deepest nesting of maps and arrays accepted in a commit and in JSON the core parses:
#: 5 levels of a commit's own structure + ctxrules.limits.MAX_NESTING (100).
MAX_DEPTH: int

#: A commit as the core takes it: its MessagePack bytes, or its item tuple.
_Commit = bytes | tuple[ContextItem, ...] | list[ContextItem]

def count_tokens(encoding_name: str, text: str, cached: bool = True) -> int: ...
def count_tokens_batch(encoding_name: str, texts: list[str], cached: bool = True) -> list[int]: ...
def encoding_ranks(encoding_name: str) -> list[bytes]: ...
def token_cache_len() -> int: ...
def token_cache_stats() -> tuple[int, int, int, int]: ...
def token_cache_clear() -> None: ...
def render_context(commit: _Commit, options: bytes) -> bytes: ...
def render_request(
    provider: str, commit: _Commit, options: bytes, frame: EstimateFrame | None = None
) -> tuple[bytes, bytes, Estimate | None]: ...
def render_batch(
    commits: list[_Commit],
    jobs: list[tuple[str, int, bytes]],
    threads: int | None = None,
    frames: Sequence[EstimateFrame | None] | None = None,
) -> list[tuple[bytes, bytes, Estimate | None] | str]: ...
def render_sessions(
    sessions: Sequence[Sequence[_Commit]],
    options: list[bytes],
    chains: list[tuple[str, int, list[int]]],
    threads: int | None = None,
    meta: bool = True,
    frames: Sequence[EstimateFrame | None] | None = None,
) -> list[tuple[list[bytes] | str, list[bytes], list[int], list[Estimate | None]]]: ...
def estimate_stats() -> tuple[int, int]: ...

@final
class EstimateFrame:
    def __new__(cls, data: bytes) -> EstimateFrame: ...
    @property
    def wire(self) -> str: ...
    @property
    def encoding(self) -> str: ...

@final
class Estimate:
    @property
    def input_tokens(self) -> int: ...
    @property
    def prefix_tokens(self) -> int: ...
    def __len__(self) -> int: ...
    def with_prefix(self, prefix: int) -> Estimate: ...
    def segments(self) -> list[tuple[str, int, str | None]]: ...
    def rules(self) -> dict[str, str | int | float]: ...
    def breakpoints(self) -> list[tuple[int, int, str]]: ...
    def cumulative(self, i: int) -> int: ...
    def shared_prefix(self, previous: object) -> tuple[int, int]: ...
    def __eq__(self, value: object, /) -> bool: ...

def item_cache_stats() -> dict[str, int]: ...
def item_cache_clear() -> None: ...
def set_item_cache_capacity(capacity: int) -> None: ...
def diff_items(
    a: _Commit, b: _Commit
) -> tuple[list[str], list[str], list[tuple[str, str, str]], list[str], int, int]: ...
