"""Tokenizers as a plugin kind: names, the registry holds only tokenizers, a third-party
tokenizer counts the models that name it."""

from __future__ import annotations

import pytest

import ctxrules
from ctxrules import plugins
from ctxrules.errors import PluginError
from ctxrules.tokenizers import DEFAULT_ENCODING, RustTokenizer, Tokenizer, get_tokenizer


def test_builtin_names_resolve_to_tokenizers():
    for name in ("o200k_base", "cl100k_base", "tiktoken:o200k_base", "tiktoken:cl100k_base"):
        tok = get_tokenizer(name)
        assert isinstance(tok, Tokenizer)
        assert tok.name == name
    assert isinstance(get_tokenizer(), RustTokenizer)
    assert get_tokenizer().name == DEFAULT_ENCODING
    text = "The oracle and the Rust counter agree."
    assert get_tokenizer("tiktoken:cl100k_base").count(text) == get_tokenizer("cl100k_base").count(
        text
    )


def test_the_registry_holds_only_tokenizers():
    reg = plugins.registry("tokenizers")
    assert reg.items and all(isinstance(t, Tokenizer) for t in reg.items.values())
    # What used to be registered here as model mappings is model data now.
    assert "anthropic" not in reg and "openai-4o" not in reg
    assert all(t.name == n for n, t in reg.items.items())


def test_unknown_tokenizer_lists_the_known_ones():
    with pytest.raises(PluginError, match=r"no tokenizer named 'gpt2'.*o200k_base") as err:
        get_tokenizer("gpt2")
    assert "tiktoken:cl100k_base" in str(err.value)


WORDS = """
from ctxrules.hookspecs import hookimpl
from ctxrules.providers import ModelInfo


class Words:
    name = "fake-words"

    def count(self, text):
        return len(text.split())

    def count_batch(self, texts):
        return [self.count(t) for t in texts]


@hookimpl
def register_tokenizers(register):
    register(Words())


@hookimpl
def register_models(register):
    register(ModelInfo(name="words-claude", pattern="anthropic:claude-*", tokenizer="fake-words"))
"""


def test_a_plugin_tokenizer_counts_the_models_that_name_it(plugin_site):
    plugin_site.install("fake-words", "fake_words", WORDS)
    profile = ctxrules.resolve_model("anthropic:claude-opus-4")
    # Its entry states the tokenizer: the built-in calibration does not come along.
    assert (profile.tokenizer, profile.calibration) == ("fake-words", 1.0)
    assert profile.estimate_tokens(["three words here", "two words"]) == 5
    assert get_tokenizer("fake-words").count("a b") == 2
