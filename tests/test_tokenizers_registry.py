"""Tokenizers as a plugin kind: names, model resolution, calibration, third-party overrides."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from ctxrules import plugins
from ctxrules.errors import PluginError, TokenizerError
from ctxrules.tokenizers import (
    DEFAULT_ENCODING,
    ModelTokenizer,
    RustTokenizer,
    Tokenizer,
    get_tokenizer,
    model_mappings,
    resolve_model,
)
from ctxrules.tokenizers._plugin import ANTHROPIC_CALIBRATION


def install_fake(root: Path, ep_name: str, module: str, body: str) -> None:
    """Write an installed-looking distribution whose entry point is ``ep_name``."""
    info = root / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ctxrules]\n{ep_name} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(body))


PLUGIN = """
from ctxrules.hookspecs import hookimpl
from ctxrules.tokenizers import ModelTokenizer


class Words:
    name = "{prefix}-words"

    def count(self, text):
        return len(text.split())

    def count_batch(self, texts):
        return [self.count(t) for t in texts]


@hookimpl
def register_tokenizers(register):
    register(Words())
    register(ModelTokenizer("{prefix}-claude", "anthropic:claude-*", "{prefix}-words", 1.0))
    register(ModelTokenizer("{prefix}-acme", "acme:*", "cl100k_base", 2.0))
"""


@pytest.fixture
def site(tmp_path, fresh_plugins):
    """A temporary site directory on sys.path with every third-party plugin allowed."""
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    fresh_plugins.syspath_prepend(str(tmp_path))
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("fake_tok")]:
        del sys.modules[mod]


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


def test_unknown_tokenizer_lists_the_known_ones():
    with pytest.raises(PluginError, match=r"no tokenizer named 'gpt2'.*o200k_base") as err:
        get_tokenizer("gpt2")
    # Model mappings are not offered as tokenizer names.
    assert "openai-4o" not in str(err.value)
    assert "tiktoken:cl100k_base" in str(err.value)
    with pytest.raises(TokenizerError, match="model mapping"):
        get_tokenizer("anthropic")


@pytest.mark.parametrize(
    "model,encoding",
    [
        ("openai:gpt-4o", "o200k_base"),
        ("openai:gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai:gpt-4.1-mini", "o200k_base"),
        ("openai:gpt-5", "o200k_base"),
        ("openai:o3-mini", "o200k_base"),
        ("openai:gpt-4-turbo", "cl100k_base"),
        ("openai:gpt-4", "cl100k_base"),
        ("openai:gpt-3.5-turbo", "cl100k_base"),
        ("openai-responses:gpt-4o", "o200k_base"),
    ],
)
def test_openai_models_get_their_published_encoding(model, encoding):
    tok, calibration = resolve_model(model)
    assert (tok.name, calibration) == (encoding, 1.0)


def test_unknown_model_gets_the_default_encoding():
    tok, calibration = resolve_model("someone:some-model")
    assert (tok.name, calibration) == (DEFAULT_ENCODING, 1.0)
    assert resolve_model("no-colon-at-all")[0].name == DEFAULT_ENCODING


def test_anthropic_is_a_calibrated_estimate():
    tok, calibration = resolve_model("anthropic:claude-sonnet-4-5")
    assert tok.name == "o200k_base"
    assert calibration == ANTHROPIC_CALIBRATION
    assert 1.0 < calibration < 1.5


def test_calibration_must_be_positive():
    with pytest.raises(TokenizerError, match="calibration"):
        ModelTokenizer("bad", "x:*", "o200k_base", 0.0)


@pytest.mark.parametrize("ep_name", ["aaa_first", "zzz_last"])
def test_third_party_mapping_wins_over_builtin_whatever_its_load_order(site, ep_name):
    install_fake(site, ep_name, f"fake_tok_{ep_name}", PLUGIN.format(prefix=ep_name))
    tok, calibration = resolve_model("anthropic:claude-opus-4")
    assert (tok.name, calibration) == (f"{ep_name}-words", 1.0)
    assert tok.count("three words here") == 3
    # A new provider from the plugin, and built-ins still serve the rest.
    tok, calibration = resolve_model("acme:rocket-1")
    assert (tok.name, calibration) == ("cl100k_base", 2.0)
    assert resolve_model("openai:gpt-4o")[0].name == "o200k_base"
    order = [m.name for m in model_mappings()]
    assert order.index(f"{ep_name}-claude") < order.index("anthropic")


def test_two_plugins_mapping_one_model_first_loaded_wins(site):
    for ep_name in ("bbb", "aaa"):
        install_fake(site, ep_name, f"fake_tok_{ep_name}", PLUGIN.format(prefix=ep_name))
    assert resolve_model("anthropic:claude-x")[0].name == "aaa-words"


def test_a_mapping_to_an_unregistered_tokenizer_fails_clearly(site):
    install_fake(
        site,
        "broken",
        "fake_tok_broken",
        """
        from ctxrules.hookspecs import hookimpl
        from ctxrules.tokenizers import ModelTokenizer

        @hookimpl
        def register_tokenizers(register):
            register(ModelTokenizer("broken", "broken:*", "no-such-tokenizer"))
        """,
    )
    with pytest.raises(PluginError, match="no-such-tokenizer"):
        resolve_model("broken:model")
