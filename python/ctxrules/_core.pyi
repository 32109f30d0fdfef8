# Hand-written stub of the compiled extension; checked by `python -m mypy.stubtest ctxrules._core`.

__all__ = [
    "ENCODINGS",
    "__version__",
    "count_tokens",
    "count_tokens_batch",
    "diff_items",
    "encoding_ranks",
    "render_context",
    "render_request",
    "token_cache_clear",
    "token_cache_len",
    "token_cache_stats",
]

__version__: str
ENCODINGS: list[str]

def count_tokens(encoding_name: str, text: str, cached: bool = True) -> int: ...
def count_tokens_batch(encoding_name: str, texts: list[str], cached: bool = True) -> list[int]: ...
def encoding_ranks(encoding_name: str) -> list[bytes]: ...
def token_cache_len() -> int: ...
def token_cache_stats() -> tuple[int, int, int, int]: ...
def token_cache_clear() -> None: ...
def render_context(commit: bytes, options: bytes) -> bytes: ...
def render_request(provider: str, commit: bytes, options: bytes) -> tuple[bytes, bytes]: ...
def diff_items(
    a: bytes, b: bytes
) -> tuple[list[str], list[str], list[tuple[str, str, str]], list[str], int, int]: ...
