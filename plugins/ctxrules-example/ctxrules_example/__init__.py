"""Example ctxrules plugin: one tokenizer and the models it counts."""

from __future__ import annotations

from collections.abc import Sequence

from ctxrules.hookspecs import RegisterModels, RegisterTokenizers, hookimpl
from ctxrules.providers import ModelInfo

__all__ = ["CharsPerTokenEstimate", "register_models", "register_tokenizers"]


class CharsPerTokenEstimate:
    """Estimates tokens as ``ceil(len(text) / chars_per_token)``; never exact, always cheap."""

    def __init__(self, name: str = "chars4", chars_per_token: int = 4):
        self.name = name
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        """Estimated token count of ``text``."""
        return -(-len(text) // self.chars_per_token)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Estimated token counts of ``texts``, in order."""
        return [self.count(t) for t in texts]


@hookimpl
def register_tokenizers(register: RegisterTokenizers) -> None:
    register(CharsPerTokenEstimate())


@hookimpl
def register_models(register: RegisterModels) -> None:
    register(
        ModelInfo(
            name="example-models",
            pattern="example:*",
            context_window=32_000,
            max_output_tokens=4_096,
            tokenizer="chars4",
        )
    )
