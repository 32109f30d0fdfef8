"""The one model resolver: built-in figures, the precedence rule (most specific pattern
per field; a plugin beats a built-in of equal specificity whatever the load order),
validation, and the callers that use it."""

from __future__ import annotations

import pytest

import ctxrules
from ctxrules import plugins
from ctxrules.errors import ProviderError, ValidationError
from ctxrules.providers import (
    ModelInfo,
    ModelProfile,
    Prices,
    Usage,
    model_entries,
    model_families,
    model_in_family,
    resolve_model,
)
from ctxrules.providers._model_table import (
    ANTHROPIC_CALIBRATION,
    ANTHROPIC_STRUCTURED_CALIBRATION,
)
from ctxrules.render import header_tokens, request_options
from ctxrules.tokenizers import get_tokenizer


def test_one_resolver_is_public():
    assert ctxrules.resolve_model is resolve_model
    assert isinstance(resolve_model("anthropic:claude-sonnet-4-5"), ModelProfile)


def test_limits_most_specific_wins():
    assert resolve_model("anthropic:claude-sonnet-4-5").max_output_tokens == 64_000
    assert resolve_model("anthropic:claude-opus-4-1").max_output_tokens == 32_000
    assert resolve_model("anthropic:claude-opus-4-5-20251101").max_output_tokens == 64_000
    assert resolve_model("openai-chat:gpt-4o-mini").context_window == 128_000
    assert resolve_model("openai-responses:gpt-4.1").context_window == 1_047_576
    assert resolve_model("openai:gpt-4").context_window == 8_192
    assert resolve_model("gemini:gemini-2.5-pro").context_window == 1_048_576
    assert resolve_model("gemini:gemini-1.5-pro-002").context_window == 2_097_152
    assert resolve_model("anthropic:claude-next").context_window == 200_000  # catch-all


@pytest.mark.parametrize(
    "model,encoding",
    [
        ("openai:gpt-4o", "o200k_base"),
        ("openai:gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai:chatgpt-4o-latest", "o200k_base"),
        ("openai:gpt-4.1-mini", "o200k_base"),
        ("openai:gpt-4.5-preview", "o200k_base"),
        ("openai:gpt-5", "o200k_base"),
        ("openai:o3-mini", "o200k_base"),
        ("openai:gpt-4-turbo", "cl100k_base"),
        ("openai:gpt-4", "cl100k_base"),
        ("openai:gpt-3.5-turbo", "cl100k_base"),
        ("openai:text-embedding-3-small", "cl100k_base"),
        ("openai-responses:gpt-4o", "o200k_base"),
        ("openai-chat:some-future-model", "o200k_base"),
    ],
)
def test_openai_models_get_their_published_encoding(model, encoding):
    p = resolve_model(model)
    assert (p.tokenizer, p.calibration) == (encoding, 1.0)


def test_anthropic_is_a_calibrated_estimate():
    p = resolve_model("anthropic:claude-sonnet-4-5")
    assert p.tokenizer == "o200k_base"
    # Prose counts like o200k; structured payloads (tool inputs/results) more.
    assert p.calibration == ANTHROPIC_CALIBRATION == 1.0
    assert p.structured_calibration == ANTHROPIC_STRUCTURED_CALIBRATION
    assert 1.0 < p.structured_calibration < 1.5
    assert p.sources["calibration"] == p.sources["tokenizer"] == "anthropic-default"
    assert p.sources["structured_calibration"] == "anthropic-default"


@pytest.mark.parametrize(
    "model,auto,forced",
    [
        # Anthropic's tool-use page, its current table (the older one gave 346 / 313).
        ("anthropic:claude-sonnet-4-5", 496, 588),
        ("anthropic:claude-sonnet-4-6", 497, 589),
        ("anthropic:claude-opus-4-6", 497, 589),
        ("anthropic:claude-opus-4-1", 313, 315),
        ("anthropic:claude-sonnet-4-20250514", 313, 315),
        ("anthropic:claude-3-opus-20240229", 530, 281),
        ("anthropic:claude-3-sonnet-20240229", 159, 235),
        ("anthropic:claude-3-haiku-20240307", 264, 340),
        ("anthropic:claude-3-5-haiku-latest", 264, 340),
        # Haiku 4.5: the page's 496 / 588; the fit set's 30 Haiku 4.5 requests fit 487.
        ("anthropic:claude-haiku-4-5", 496, 588),
        # OpenAI: the gpt-5 family's is fitted; no forced variant.
        ("openai-chat:gpt-5.4-mini", 90, 90),
        ("gemini:gemini-2.5-flash", 0, 0),
    ],
)
def test_tool_prompt_tokens_per_model(model, auto, forced):
    p = resolve_model(model)
    assert (p.tool_prompt_tokens, p.tool_prompt_tokens_forced) == (auto, forced)


def test_structured_calibration_defaults_to_calibration(plugin_site):
    plugin_site.install(
        "fake-models-cal",
        "fake_models_cal",
        """
        from ctxrules.hookspecs import hookimpl
        from ctxrules.providers import ModelInfo

        @hookimpl
        def register_models(register):
            register(ModelInfo(name="acme", pattern="acme:*", context_window=1000,
                               max_output_tokens=100, tokenizer="o200k_base",
                               calibration=1.3))
        """,
    )
    p = resolve_model("acme:x")
    assert (p.calibration, p.structured_calibration) == (1.3, 1.3)
    assert (p.tool_prompt_tokens, p.tool_prompt_tokens_forced) == (0, 0)


@pytest.mark.parametrize(
    "model,minimum",
    [
        ("anthropic:claude-sonnet-4-5-20250929", 1_024),
        ("anthropic:claude-sonnet-4-6", 1_024),
        ("anthropic:claude-opus-4-1", 1_024),
        ("anthropic:claude-opus-4-5", 4_096),
        ("anthropic:claude-opus-4-6", 4_096),
        ("anthropic:claude-haiku-4-5-20251001", 4_096),
        ("anthropic:claude-3-5-haiku-20241022", 2_048),
        ("openai-chat:gpt-4o", 1_024),
        ("openai-responses:gpt-5", 1_024),
        ("gemini:gemini-2.5-flash", 2_048),
        ("gemini:gemini-3-pro-preview", 4_096),
        ("gemini:gemini-1.5-flash", None),
    ],
)
def test_cache_minimums(model, minimum):
    assert resolve_model(model).cache_min_tokens == minimum


def test_prices_where_known():
    sonnet = resolve_model("anthropic:claude-sonnet-4-5")
    assert sonnet.prices == Prices(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
    assert resolve_model("anthropic:claude-opus-4-5").prices == Prices(
        input=5.0, output=25.0, cache_read=0.50, cache_write=6.25
    )
    assert resolve_model("anthropic:claude-opus-4-20250514").prices.input == 15.0
    assert resolve_model("openai:gpt-4.1").prices == Prices(
        input=2.0, output=8.0, cache_read=0.50, cache_write=2.0
    )
    assert resolve_model("openai-chat:gpt-5.4-mini").prices == Prices(
        input=0.75, output=4.50, cache_read=0.075, cache_write=0.75
    )
    assert resolve_model("openai:gpt-5.4").prices.output == 15.0
    # A dated snapshot or an unknown variant has no price rather than a guessed one.
    assert resolve_model("openai:gpt-4o-2024-05-13").prices is None
    assert resolve_model("openai:gpt-5.4-mini-2026-03-17").prices is None
    assert resolve_model("anthropic:claude-opus-4-7").prices is None
    assert resolve_model("gemini:gemini-2.5-pro").prices is None


def test_cost_applies_the_four_prices():
    p = resolve_model("anthropic:claude-sonnet-4-5")
    usage = Usage(
        input_tokens=1_000_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=100_000,
    )
    assert p.cost(usage) == pytest.approx(3.0 + 2 * 0.30 + 3.75 + 0.1 * 15.0)
    assert resolve_model("gemini:gemini-2.5-pro").cost(usage) is None


def test_malformed_and_unknown_specs_are_clear_errors():
    with pytest.raises(ProviderError, match="provider:model"):
        resolve_model("gpt-4o")
    with pytest.raises(ProviderError, match="no context window known for 'nobody:model'"):
        resolve_model("nobody:model")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"pattern": "no-colon"}, "provider:model"),
        ({"context_window": 0}, "context_window must be a positive int"),
        ({"max_output_tokens": "4096"}, "max_output_tokens must be a positive int"),
        ({"tokenizer": "o200k_base", "calibration": 0.0}, "calibration must be a finite"),
        ({"tokenizer": "o200k_base", "calibration": float("nan")}, "calibration must be"),
        ({"calibration": 1.2}, "calibration without tokenizer"),
        ({"structured_calibration": 1.2}, "calibration without tokenizer"),
        (
            {"tokenizer": "o200k_base", "structured_calibration": -1.0},
            "structured_calibration must",
        ),
        ({"tool_prompt_tokens": -5}, "tool_prompt_tokens must be an int >= 0"),
    ],
)
def test_model_info_is_validated(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        ModelInfo(name="bad", **{"pattern": "x:*", **kwargs})


def test_callers_use_the_resolver():
    anthropic = ctxrules.providers.get_provider("anthropic")
    opts = request_options(anthropic, "claude-3-haiku-20240307")
    assert opts.max_tokens == resolve_model("anthropic:claude-3-haiku-20240307").max_output_tokens
    texts = ["You are a careful assistant."]
    raw = get_tokenizer("o200k_base").count_batch(texts)[0]
    assert header_tokens("anthropic", "claude-sonnet-4-5", system=texts[0]) == round(
        raw * ANTHROPIC_CALIBRATION
    )
    assert header_tokens("openai-chat", "gpt-4", system=texts[0]) == get_tokenizer(
        "cl100k_base"
    ).count(texts[0])


PLUGIN = """
from ctxrules.hookspecs import hookimpl
from ctxrules.providers import ModelInfo, Prices


@hookimpl
def register_models(register):
    # Same pattern (so the same specificity) as the built-in "claude-opus-4" entry.
    register(ModelInfo(name="{prefix}-opus", pattern="anthropic:claude-opus-4*",
                       max_output_tokens={out}))
    register(ModelInfo(name="{prefix}-acme", pattern="acme:*", context_window=64_000,
                       max_output_tokens=8_000, tokenizer="cl100k_base", calibration=2.0,
                       prices=Prices(input=1.0, output=2.0, cache_read=0.1, cache_write=1.0)))
"""


@pytest.mark.parametrize("ep_name", ["aaa_first", "zzz_last"])
def test_a_plugin_beats_a_builtin_of_equal_specificity_whatever_its_load_order(
    plugin_site, ep_name
):
    plugin_site.install(
        f"fake-models-{ep_name}",
        f"fake_models_{ep_name}",
        PLUGIN.format(prefix=ep_name, out=99_000),
        ep_name=ep_name,
    )
    p = resolve_model("anthropic:claude-opus-4-1")
    assert p.max_output_tokens == 99_000 and p.sources["max_output_tokens"] == f"{ep_name}-opus"
    # Every other field still comes from the built-ins ...
    assert (p.context_window, p.tokenizer, p.calibration) == (
        200_000,
        "o200k_base",
        ANTHROPIC_CALIBRATION,
    )
    # ... and a more specific built-in still beats the plugin's broader pattern.
    assert resolve_model("anthropic:claude-opus-4-5").max_output_tokens == 64_000
    acme = resolve_model("acme:rocket-1")
    assert (acme.context_window, acme.tokenizer, acme.calibration) == (64_000, "cl100k_base", 2.0)
    assert acme.cache_min_tokens is None and acme.prices is not None
    names = [m.name for m in model_entries()]
    assert names.index(f"{ep_name}-opus") < names.index("claude-opus-4")


def test_between_plugins_of_equal_specificity_the_first_registered_wins(plugin_site):
    for ep_name, out in (("bbb", 22_000), ("aaa", 11_000)):
        plugin_site.install(
            f"fake-models-{ep_name}",
            f"fake_models_{ep_name}",
            PLUGIN.format(prefix=ep_name, out=out),
            ep_name=ep_name,
        )
    # Third-party plugins load in entry-point name order: "aaa" registers first.
    assert resolve_model("anthropic:claude-opus-4").max_output_tokens == 11_000


def test_models_are_their_own_registry(fresh_plugins):
    models = plugins.registry("models")
    assert models.items and all(isinstance(m, ModelInfo) for m in models.items.values())
    assert not any(isinstance(p, ModelInfo) for p in plugins.registry("providers").items.values())
    assert {m.name for m in model_entries()} == set(models.items)


def test_a_model_naming_an_unregistered_tokenizer_fails_when_counting(plugin_site):
    plugin_site.install(
        "fake-broken",
        "fake_broken_models",
        """
        from ctxrules.hookspecs import hookimpl
        from ctxrules.providers import ModelInfo

        @hookimpl
        def register_models(register):
            register(ModelInfo(name="broken", pattern="broken:*", context_window=10,
                               max_output_tokens=1, tokenizer="no-such-tokenizer"))
        """,
    )
    with pytest.raises(ctxrules.errors.PluginError, match="no-such-tokenizer"):
        resolve_model("broken:model").estimate_tokens(["text"])


def test_a_spec_is_resolved_once_per_registry(fresh_plugins):
    first = resolve_model("openai:gpt-4o")
    assert resolve_model("openai:gpt-4o") is first
    plugins.reset()  # a new registry (e.g. other plugins installed) resolves afresh
    again = resolve_model("openai:gpt-4o")
    assert again is not first and again == first


@pytest.mark.parametrize(
    "model,families",
    [
        ("claude-sonnet-4-20250514", ("anthropic",)),
        ("claude-opus-4-5-20251101", ("anthropic",)),
        ("claude-next", ("anthropic",)),  # the vendor's naming scheme, no figures yet
        ("gpt-4o", ("openai",)),
        ("gpt-5.4-mini", ("openai",)),
        ("o3-mini", ("openai",)),
        ("chatgpt-4o-latest", ("openai",)),
        ("gemini-3-flash-preview", ("gemini",)),
        # Names no table names: custom, fine-tuned, or not a model at all.
        ("my-proxy-model", ()),
        ("ft:gpt-4o:acme", ()),
        ("<synthetic>", ()),
    ],
)
def test_the_model_table_says_which_family_a_model_belongs_to(model, families):
    assert model_families(model) == families
    for family in ("anthropic", "openai", "gemini"):
        expected = None if not families else family in families
        assert model_in_family(model, family) is expected


def test_a_plugins_models_belong_to_its_family(plugin_site):
    plugin_site.install(
        "fake-models-family",
        "fake_models_family",
        """
        from ctxrules.hookspecs import hookimpl
        from ctxrules.providers import ModelInfo

        @hookimpl
        def register_models(register):
            register(ModelInfo(name="acme-rocket", pattern="acme:rocket-*",
                               context_window=1000, max_output_tokens=100,
                               tokenizer="o200k_base"))
        """,
    )
    assert model_families("rocket-1") == ("acme",)
    assert model_in_family("rocket-1", "acme") is True
    assert model_in_family("rocket-1", "anthropic") is False
