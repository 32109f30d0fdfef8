"""The built-in model facts, registered by ``ctxrules.providers._plugin``.

Sources, as read on 2026-12-02 (figures change; a plugin entry of the same pattern
overrides any of them, see ``ctxrules.providers.models``):

* Anthropic: the models overview (context windows, maximum output), the pricing page
  (base input, 5-minute cache write = 1.25 x input, cache hit = 0.1 x input, output;
  the <= 200K-token tier where a model has a long-context tier) and the prompt-caching
  page (minimum cacheable prompt: 1,024 tokens for Sonnet 3.7 / 4 / 4.5 / 4.6 and
  Opus 4 / 4.1, 2,048 for Haiku 3 / 3.5, 4,096 for Opus 4.5 / 4.6 and Haiku 4.5).
* OpenAI: the model pages (windows, output limits), the pricing page (input, cached
  input, output; no premium for cache writes) and the prompt-caching guide (prompts of
  1,024 tokens or more are cached, on every model that caches); GPT-5.2 and the GPT-5.4
  line as read on 2026-12-03.  Prices are attached to the plain model names only: dated
  snapshots and variants (audio, realtime, search) are priced differently, and no price
  is better than a wrong one.
* Google: the Gemini models page (windows, output limits) and the context-caching page
  (implicit caching minimum: 2,048 tokens for Gemini 2.5 Flash / Pro, 4,096 for the
  Gemini 3 family).  No Gemini prices: they are tiered by prompt length and cache
  storage is billed per hour, which four per-million figures cannot express.

Tokenizers: OpenAI models use the encodings tiktoken's model table gives them (o200k
for GPT-4o / 4.1 / 4.5 / 5 and the o-series, cl100k for GPT-4 / 3.5 and the
embeddings).  Anthropic and Google do not publish theirs: o200k counts times a
calibration estimate them, one for prose and one for structured payloads (tool
definitions, inputs, results).

Tool prompts (tokens a vendor adds to a request that declares tools): Anthropic's
tool-use page, its current table: 313 / 315 (``tool_choice`` auto / forced) for Opus 4
/ 4.1 and Sonnet 4, 496 / 588 for the 4.5 models (Haiku 4.5 included: its 30 requests
of the fit set fit 487), 497 / 589 for 4.6; the older table's 346 / 313 for 3.5 / 3.7,
264 / 340 for the 3 and 3.5 Haikus, 530 / 281 for 3 Opus, 159 / 235 for 3 Sonnet.
OpenAI's figures are fitted (benches/README.md, "Fidelity"); Gemini adds none
measurably.

Each model's estimator rules (``ModelInfo.estimator``: framing, which thinking is
kept, the thought-signature line, the image rule, structured-output overhead) and the
basis of every rule and field (``ModelInfo.basis``: ``doc: …`` or ``fit: …``) are
stated here; ``ctxrules.providers.models.resolve_model`` merges them key by key.

The calibrations and every fitted constant, with the data they were fitted on and
their residuals, are in benches/README.md ("Fidelity").
"""

from __future__ import annotations

from .anthropic import (
    ANTHROPIC_LINE_BREAK_TOKENS,
    ANTHROPIC_MESSAGE_TOKENS,
    ANTHROPIC_OUTPUT_FORMAT_TOKENS,
    ANTHROPIC_PDF_PAGE_TOKENS,
    ANTHROPIC_REQUEST_TOKENS,
    ANTHROPIC_THINKING_PROMPT_TOKENS,
    ANTHROPIC_TOOL_BLOCK_TOKENS,
)
from .gemini import (
    GEMINI_3_CONTENT_TOKENS,
    GEMINI_25_FLASH_FUNCTION_PART_TOKENS,
    GEMINI_25_FLASH_SIGNATURE_SLOPE,
    GEMINI_FUNCTION_PART_TOKENS,
    GEMINI_PDF_PAGE_TOKENS,
    GEMINI_RESPONSE_SCHEMA_TEXT,
    GEMINI_RESPONSE_SCHEMA_TOKENS,
    GEMINI_SIGNATURE_OFFSET,
    GEMINI_SIGNATURE_SLOPE,
)
from .images import ANTHROPIC_IMAGE_RULE, GEMINI_IMAGE_RULE, OPENAI_IMAGE_RULE
from .models import ModelInfo, Prices
from .openai_chat import (
    OPENAI_GPT5_ASSISTANT_TEXT_TOKENS,
    OPENAI_MESSAGE_TOKENS,
    OPENAI_REPLY_TOKENS,
    OPENAI_RESPONSE_FORMAT_TOKENS,
    OPENAI_TOOL_CALL_TOKENS,
)

__all__ = ["ANTHROPIC_CALIBRATION", "ANTHROPIC_STRUCTURED_CALIBRATION", "BUILTIN_MODELS"]

# Fitted on recorded usage (benches/README.md, "Fidelity"): English prose counts the
# same as o200k (the cassette of 100 repeated sentences: 1,101 o200k tokens, 1,114
# billed), tool inputs and results (code, JSON, paths) 1.19 x o200k (the growth of
# the Claude Code transcripts' requests, per-file residuals within 1 %).
ANTHROPIC_CALIBRATION = 1.0
ANTHROPIC_STRUCTURED_CALIBRATION = 1.19


def _anthropic_prices(input_price: float, output_price: float) -> Prices:
    # The published cache multipliers: write 1.25 x input (5-minute TTL), hit 0.1 x input.
    return Prices(
        input=input_price,
        output=output_price,
        cache_read=round(input_price * 0.1, 6),
        cache_write=round(input_price * 1.25, 6),
    )


def _openai_prices(input_price: float, cached: float, output_price: float) -> Prices:
    return Prices(
        input=input_price, output=output_price, cache_read=cached, cache_write=input_price
    )


_A = "anthropic:"
_O = "openai*:"  # openai, openai-chat, openai-responses
_G = "gemini:"

# Where the estimator's rules are from (``ModelInfo.basis``).
_TOOL_USE_DOC = "doc: Anthropic tool-use overview, pricing table (read 2026-07-13)"
_THINKING_DOC = "doc: Anthropic extended thinking, thinking block preservation by model"
_VISION_DOC = "doc: Anthropic vision page (w x h / 750, 1,568-px edge, ~1.15 MP)"
_OPENAI_VISION = "doc: OpenAI images-vision guide, via the openai-image-token-counter mirror"
_FIT = "fit: the corpus's fit set, benches/README.md 'Per-model estimates'"
_COOKBOOK = "doc: OpenAI cookbook, How_to_count_tokens_with_tiktoken (3 / 1 / 3)"


# The reasoning models (gpt-5, o-series) bill one token less per request than the
# cookbook's framing: the reply they are primed for counts 2, not 3 (the 8 fit-set
# requests of these models without tools, images or schemas: +1 at the median with 3).
_REASONING_REPLY = 2
_REASONING_REPLY_FIT = "fit: 8 gpt-5 / o-series requests of the fit set without tools (+1 with 3)"

# Claude 3 (Haiku, Opus, Sonnet): a request's framing one token less than the pooled
# fit's: the fit set's 14 Claude 3 requests are 1 over at the median (four 10-token
# requests each 11).
_CLAUDE_3_REQUEST = ANTHROPIC_REQUEST_TOKENS - 1
_CLAUDE_3_REQUEST_FIT = "fit: the fit set's 14 Claude 3 requests, 1 over at the median with 4"

# GPT-4 / 4o / 3.5 tools on Chat Completions.  The tool section beyond the declarations
# is 9 tokens, 4 fewer when the request has a system message (the declarations join
# it), as hmarr/openai-chat-tokens measured; the fit set agrees (the two requests
# without a system message, a forced choice or parallel_tool_calls: 9, 9; with a
# system message 5 and 8).  Fitted on the fit set: parallel_tool_calls=false adds 2
# (magentic's return_bool: 11), a named tool_choice 9 more (magentic's four forced
# requests 20 = 9 + 2 + 9; instructor's two 14), a tool call with its result 7 where
# tools are declared (the second request of each exchange: 4 ... 8 fewer than the
# first's 12, median 5) and 16 where none are (ruby-openai's follow-up: 2 calls, 33).
# On the Responses API the same models keep 12 (their recordings are under-counted
# already, benches/README.md).
_CHAT_TOOL_PROMPT_4 = 9
# The Responses API on GPT-4o / 4o-mini / 4.1: the tool section is 2 tokens beyond the
# declarations (RESPONSES_TOOL_PROMPT_4), and the parameters' titles count as comment
# lines (responses_titles); fitted on the fit set's first requests with function tools.
_RESPONSES_TOOL_PROMPT_4 = 2
# A forced call (``tool_choice`` "required" or a named function) adds 9 to that section,
# "required" as much as the named function (Chat's ``tool_forced`` counts the named one
# only).  Fitted on the fit set's three activeagent gpt-4.1 requests that differ only in
# ``tool_choice``: 38 billed with "auto", 47 with "required", 47 with the function named.
_RESPONSES_TOOL_FORCED_4 = 9
_RESPONSES_TOOLS_4 = {
    "responses_tool_prompt": _RESPONSES_TOOL_PROMPT_4,
    "responses_titles": "comment",
    "responses_tool_forced": _RESPONSES_TOOL_FORCED_4,
}
_RESPONSES_TOOLS_4_BASIS = {
    "responses_tool_prompt": "fit: the fit set's GPT-4o / 4o-mini / 4.1 Responses requests "
    "with function tools and no call yet: 2 ... 3 beyond the declarations with titles read",
    "responses_titles": "fit: the same; with pydantic titles 8 ... 30 over the untitled "
    "declarations, within 1 of the titles as comment lines",
    "responses_tool_forced": "fit: activeagent's gpt-4.1 request billed 38 with tool_choice "
    "auto, 47 with required, 47 with the function named (+9 each)",
}
# The Responses API on GPT-4.1 (4.1, 4.1-mini, 4.1-nano): a function call sent back with
# its output costs 6 tokens beyond their text where the request declares tools, not the
# 12 of ``tool_call`` (which a request declaring none keeps: the fit set's one such
# request fits 11).  Fitted on the fit set's 21 GPT-4.1 Responses requests that send
# calls back with tools declared (chatlas, langsmith, ellmer): 4 ... 14 % over with 12,
# the mean error least at 6 (6.4 % -> 2.1 %; the median residual is 0 at 7), as Chat's
# GPT-4 models bill a call less where tools are declared (``chat_tool_call``).
_RESPONSES_TOOL_CALL_41 = 6
# Gemini 2.0's tool section beyond its declarations' words (fitted, see "gemini-2.0").
_GEMINI_20_TOOL_PROMPT = 4
_RESPONSES_TOOL_CALL_41_BASIS = (
    "fit: the fit set's 21 GPT-4.1 / 4.1-mini / 4.1-nano Responses requests sending calls "
    "back with tools declared (chatlas, langsmith, ellmer): mean error least at 6 "
    "(6.4 % -> 2.1 %)"
)
_CHAT_TOOLS_4 = {
    "tool_system_saving": 4,
    "parallel_off": 2,
    "tool_forced": 9,
    "chat_tool_call": 7,
    "tool_call_undeclared": 16,
    "responses_tool_prompt": 12,
}
_CHAT_TOOLS_4_BASIS = {
    "tool_prompt_tokens": "measured: hmarr/openai-chat-tokens (9, 4 fewer with a system "
    "message); the fit set agrees (9, 9; 5, 8)",
    "tool_system_saving": "measured: hmarr/openai-chat-tokens; fit set 4 and 1",
    "parallel_off": _FIT,
    "tool_forced": _FIT,
    "chat_tool_call": _FIT,
    "tool_call_undeclared": _FIT,
}
# Models whose Chat tool section is not known to follow the GPT-4 rules: the defaults.
_CHAT_TOOLS_DEFAULT = {
    "tool_system_saving": 0,
    "parallel_off": 0,
    "tool_forced": 0,
    "chat_tool_call": OPENAI_TOOL_CALL_TOKENS,
    "tool_call_undeclared": OPENAI_TOOL_CALL_TOKENS,
    "responses_tool_prompt": 12,
}


def _patches(multiplier: float, budget: int = 1536) -> dict[str, float | str]:
    """OpenAI's patch rule: 32-pixel patches up to ``budget``, times ``multiplier``."""
    return {"kind": "openai-patches", "patch": 32, "max_patches": budget, "multiplier": multiplier}


def _tiles(base: int, tile: int) -> dict[str, float | str]:
    return {**OPENAI_IMAGE_RULE, "base": base, "tile_tokens": tile}


BUILTIN_MODELS: tuple[ModelInfo, ...] = (
    # Which family a model name belongs to (``model_families``): these state no figure,
    # they name every model of a vendor's naming scheme as that vendor's.
    ModelInfo(name="claude-models", pattern=_A + "claude-*"),
    ModelInfo(name="openai-models", pattern=_O + "gpt-*"),
    ModelInfo(name="openai-chatgpt-models", pattern=_O + "chatgpt-*"),
    ModelInfo(name="gemini-models", pattern=_G + "gemini-*"),
    # Anthropic
    ModelInfo(
        name="anthropic-default",
        pattern=_A + "*",
        context_window=200_000,
        max_output_tokens=8_192,
        tokenizer="o200k_base",
        calibration=ANTHROPIC_CALIBRATION,
        structured_calibration=ANTHROPIC_STRUCTURED_CALIBRATION,
        cache_min_tokens=1_024,
        tool_prompt_tokens=346,
        tool_prompt_tokens_forced=313,
        estimator={
            "tool_block": ANTHROPIC_TOOL_BLOCK_TOKENS,
            "request": ANTHROPIC_REQUEST_TOKENS,
            "message": ANTHROPIC_MESSAGE_TOKENS,
            "thinking_prompt": ANTHROPIC_THINKING_PROMPT_TOKENS,
            "output_format": ANTHROPIC_OUTPUT_FORMAT_TOKENS,
            "pdf_page": ANTHROPIC_PDF_PAGE_TOKENS,
            "line_break": ANTHROPIC_LINE_BREAK_TOKENS,
            "thinking": "last",
            "image": ANTHROPIC_IMAGE_RULE,
        },
        basis={
            "tokenizer": "fit: o200k x 1.0 prose, x 1.19 structured (Claude Code fit files)",
            "tool_prompt_tokens": "doc: Anthropic tool-use pricing, older table (3.5 / 3.7)",
            "tool_block": _FIT,
            "request": _FIT,
            "message": _FIT,
            "thinking_prompt": _FIT,
            "output_format": _FIT,
            "pdf_page": "doc: Anthropic PDF support (1,500-3,000 text tokens per page)",
            "line_break": _FIT,
            "thinking": _THINKING_DOC,
            "image": _VISION_DOC,
        },
    ),
    ModelInfo(
        name="claude-3-haiku",
        pattern=_A + "claude-3-haiku*",
        max_output_tokens=4_096,
        cache_min_tokens=2_048,
        tool_prompt_tokens=264,
        tool_prompt_tokens_forced=340,
        prices=Prices(input=0.25, output=1.25, cache_read=0.03, cache_write=0.30),
        estimator={"request": _CLAUDE_3_REQUEST},
        basis={"request": _CLAUDE_3_REQUEST_FIT},
    ),
    ModelInfo(
        name="claude-3-opus",
        pattern=_A + "claude-3-opus*",
        max_output_tokens=4_096,
        tool_prompt_tokens=530,
        tool_prompt_tokens_forced=281,
        prices=_anthropic_prices(15.0, 75.0),
        estimator={"request": _CLAUDE_3_REQUEST},
        basis={"request": _CLAUDE_3_REQUEST_FIT},
    ),
    ModelInfo(
        name="claude-3-sonnet",
        pattern=_A + "claude-3-sonnet*",
        tool_prompt_tokens=159,
        tool_prompt_tokens_forced=235,
        estimator={"request": _CLAUDE_3_REQUEST},
        basis={"request": _CLAUDE_3_REQUEST_FIT},
    ),
    ModelInfo(name="claude-3-5", pattern=_A + "claude-3-5-*", max_output_tokens=8_192),
    ModelInfo(
        name="claude-3-5-sonnet",
        pattern=_A + "claude-3-5-sonnet*",
        prices=_anthropic_prices(3.0, 15.0),
    ),
    ModelInfo(
        name="claude-3-5-haiku",
        pattern=_A + "claude-3-5-haiku*",
        cache_min_tokens=2_048,
        tool_prompt_tokens=264,
        tool_prompt_tokens_forced=340,
        prices=Prices(input=0.80, output=4.0, cache_read=0.08, cache_write=1.0),
    ),
    ModelInfo(
        name="claude-3-7-sonnet",
        pattern=_A + "claude-3-7-sonnet*",
        max_output_tokens=64_000,
        prices=_anthropic_prices(3.0, 15.0),
    ),
    ModelInfo(
        name="claude-sonnet-4",
        pattern=_A + "claude-sonnet-4*",
        max_output_tokens=64_000,
        tool_prompt_tokens=313,
        tool_prompt_tokens_forced=315,
        basis={"tool_prompt_tokens": _TOOL_USE_DOC},
    ),
    # The 4.5 and 4.6 generation: a longer tool-use system prompt (the tool-use page's
    # current table; its older table gave 346 / 313 to every 4.x model).
    ModelInfo(
        name="claude-sonnet-4-5",
        pattern=_A + "claude-sonnet-4-5*",
        tool_prompt_tokens=496,
        tool_prompt_tokens_forced=588,
        basis={"tool_prompt_tokens": _TOOL_USE_DOC},
    ),
    ModelInfo(
        name="claude-sonnet-4-6",
        pattern=_A + "claude-sonnet-4-6*",
        tool_prompt_tokens=497,
        tool_prompt_tokens_forced=589,
        estimator={"thinking": "all"},
        basis={"tool_prompt_tokens": _TOOL_USE_DOC, "thinking": _THINKING_DOC},
    ),
    # Sonnet 4 (-0 / -2025…), 4.5 and 4.6 share one price; a later 4.x may not.
    ModelInfo(
        name="claude-sonnet-4-priced",
        pattern=_A + "claude-sonnet-4-[0256]*",
        prices=_anthropic_prices(3.0, 15.0),
    ),
    ModelInfo(
        name="claude-haiku-4",
        pattern=_A + "claude-haiku-4*",
        max_output_tokens=64_000,
        tool_prompt_tokens=264,
        tool_prompt_tokens_forced=340,
    ),
    # Haiku 4.5 frames a tool_use / tool_result block with 21 tokens, not the 33 fitted
    # on the Claude Code transcripts (Opus and Sonnet): the fit set's Haiku 4.5 requests
    # with tool blocks were 17.5 ... 30 tokens a block over the rest, median 21.
    ModelInfo(
        name="claude-haiku-4-5",
        pattern=_A + "claude-haiku-4-5*",
        cache_min_tokens=4_096,
        tool_prompt_tokens=496,
        tool_prompt_tokens_forced=588,
        prices=_anthropic_prices(1.0, 5.0),
        estimator={"tool_block": 21},
        basis={
            "tool_prompt_tokens": _TOOL_USE_DOC,
            "tool_block": "fit: the fit set's 27 Haiku 4.5 requests (9 with tool blocks: "
            "17.5 ... 30 a block, median 21); mean error 3.6 % -> 2.6 %",
        },
    ),
    ModelInfo(
        name="claude-opus-4",
        pattern=_A + "claude-opus-4*",
        max_output_tokens=32_000,
        tool_prompt_tokens=313,
        tool_prompt_tokens_forced=315,
        basis={"tool_prompt_tokens": _TOOL_USE_DOC},
    ),
    # Opus 4 (-0 / -2025…) and 4.1.
    ModelInfo(
        name="claude-opus-4-priced",
        pattern=_A + "claude-opus-4-[012]*",
        prices=_anthropic_prices(15.0, 75.0),
    ),
    ModelInfo(
        name="claude-opus-4-5",
        pattern=_A + "claude-opus-4-5*",
        max_output_tokens=64_000,
        cache_min_tokens=4_096,
        tool_prompt_tokens=496,
        tool_prompt_tokens_forced=588,
        prices=_anthropic_prices(5.0, 25.0),
        estimator={"thinking": "all"},
        basis={"tool_prompt_tokens": _TOOL_USE_DOC, "thinking": _THINKING_DOC},
    ),
    ModelInfo(
        name="claude-opus-4-6",
        pattern=_A + "claude-opus-4-6*",
        max_output_tokens=128_000,
        cache_min_tokens=4_096,
        tool_prompt_tokens=497,
        tool_prompt_tokens_forced=589,
        prices=_anthropic_prices(5.0, 25.0),
        estimator={"thinking": "all"},
        basis={"tool_prompt_tokens": _TOOL_USE_DOC, "thinking": _THINKING_DOC},
    ),
    # Opus 4.7 and later: a newer tokenizer (about 1.0-1.35x the tokens of 4.6 for
    # the same text, "about 30 %" on the token-counting page) and larger images.
    ModelInfo(
        name="claude-opus-4-7",
        pattern=_A + "claude-opus-4-7*",
        tokenizer="o200k_base",
        calibration=1.3,
        structured_calibration=1.3 * ANTHROPIC_STRUCTURED_CALIBRATION,
        tool_prompt_tokens=675,
        tool_prompt_tokens_forced=804,
        estimator={
            "thinking": "all",
            "image": {**ANTHROPIC_IMAGE_RULE, "max_edge": 2576, "max_pixels": 4784 * 750},
        },
        basis={
            "tokenizer": "doc: token-counting page, ~30 % more tokens than earlier models "
            "(no recorded usage of 4.7 in the corpus)",
            "tool_prompt_tokens": _TOOL_USE_DOC,
            "thinking": _THINKING_DOC,
            "image": "doc: Anthropic vision page (Opus 4.7: 2,576-px edge, 4,784 tokens)",
        },
    ),
    # OpenAI
    ModelInfo(
        name="openai-default",
        pattern=_O + "*",
        context_window=128_000,
        max_output_tokens=16_384,
        tokenizer="o200k_base",
        cache_min_tokens=1_024,
        # The tool section's own tokens beyond the declarations (tiktoken's cookbook
        # closes its function count with 12); not checked against recorded usage.
        tool_prompt_tokens=12,
        estimator={
            "message": OPENAI_MESSAGE_TOKENS,
            "reply": OPENAI_REPLY_TOKENS,
            "name": 1,
            "tool_call": OPENAI_TOOL_CALL_TOKENS,
            "chat_tool_call": OPENAI_TOOL_CALL_TOKENS,
            "response_format": OPENAI_RESPONSE_FORMAT_TOKENS,
            "image": OPENAI_IMAGE_RULE,
        },
        basis={
            "tokenizer": "doc: tiktoken's model table",
            "tool_prompt_tokens": "doc: the cookbook's closing 12 of a function count",
            "message": _COOKBOOK,
            "reply": _COOKBOOK,
            "name": _COOKBOOK,
            "tool_call": _FIT,
            "chat_tool_call": _FIT,
            "response_format": _FIT,
            "image": _OPENAI_VISION + " (GPT-4o / 4.1 tiles: 85 + 170 per tile)",
        },
    ),
    ModelInfo(
        name="gpt-4o",
        pattern=_O + "gpt-4o*",
        context_window=128_000,
        max_output_tokens=16_384,
        tokenizer="o200k_base",
        estimator=_RESPONSES_TOOLS_4,
        basis=_RESPONSES_TOOLS_4_BASIS,
    ),
    ModelInfo(name="gpt-4o-priced", pattern=_O + "gpt-4o", prices=_openai_prices(2.50, 1.25, 10.0)),
    ModelInfo(
        name="gpt-4o-mini-priced",
        pattern=_O + "gpt-4o-mini",
        prices=_openai_prices(0.15, 0.075, 0.60),
    ),
    ModelInfo(
        name="gpt-4o-mini-images",
        pattern=_O + "gpt-4o-mini*",
        estimator={"image": _tiles(2833, 5667)},
        basis={"image": _OPENAI_VISION + " (gpt-4o-mini: 2,833 + 5,667 per tile)"},
    ),
    ModelInfo(
        name="chatgpt-4o",
        pattern=_O + "chatgpt-4o*",
        tokenizer="o200k_base",
        tool_prompt_tokens=_CHAT_TOOL_PROMPT_4,
        estimator=_CHAT_TOOLS_4,
        basis=_CHAT_TOOLS_4_BASIS,
    ),
    ModelInfo(
        name="gpt-4.1",
        pattern=_O + "gpt-4.1*",
        context_window=1_047_576,
        max_output_tokens=32_768,
        tokenizer="o200k_base",
        # One gpt-4.1 Chat request with tools in the fit set (crewAI, a system message:
        # 9 over the declarations, not 5): the GPT-4 tool rules are not carried over.
        tool_prompt_tokens=12,
        estimator={
            **_CHAT_TOOLS_DEFAULT,
            **_RESPONSES_TOOLS_4,
            "responses_tool_call": _RESPONSES_TOOL_CALL_41,
        },
        basis={**_RESPONSES_TOOLS_4_BASIS, "responses_tool_call": _RESPONSES_TOOL_CALL_41_BASIS},
    ),
    ModelInfo(name="gpt-4.1-priced", pattern=_O + "gpt-4.1", prices=_openai_prices(2.0, 0.50, 8.0)),
    ModelInfo(
        name="gpt-4.1-mini-priced",
        pattern=_O + "gpt-4.1-mini",
        prices=_openai_prices(0.40, 0.10, 1.60),
    ),
    ModelInfo(
        name="gpt-4.1-nano-priced",
        pattern=_O + "gpt-4.1-nano",
        prices=_openai_prices(0.10, 0.025, 0.40),
    ),
    ModelInfo(
        name="gpt-4.1-mini-images",
        pattern=_O + "gpt-4.1-mini*",
        estimator={"image": _patches(1.62)},
        basis={"image": _OPENAI_VISION + " (patches x 1.62)"},
    ),
    ModelInfo(
        name="gpt-4.1-nano-images",
        pattern=_O + "gpt-4.1-nano*",
        estimator={"image": _patches(2.46)},
        basis={"image": _OPENAI_VISION + " (patches x 2.46)"},
    ),
    ModelInfo(
        name="gpt-4.5",
        pattern=_O + "gpt-4.5*",
        tokenizer="o200k_base",
        tool_prompt_tokens=12,
        estimator=_CHAT_TOOLS_DEFAULT,
    ),
    ModelInfo(
        name="gpt-4",
        pattern=_O + "gpt-4*",
        tokenizer="cl100k_base",
        tool_prompt_tokens=_CHAT_TOOL_PROMPT_4,
        estimator=_CHAT_TOOLS_4,
        basis=_CHAT_TOOLS_4_BASIS,
    ),
    ModelInfo(name="gpt-4-8k", pattern=_O + "gpt-4", context_window=8_192, max_output_tokens=8_192),
    ModelInfo(
        name="gpt-4-turbo",
        pattern=_O + "gpt-4-turbo*",
        context_window=128_000,
        max_output_tokens=4_096,
    ),
    ModelInfo(
        name="gpt-3.5-turbo",
        pattern=_O + "gpt-3.5*",
        context_window=16_385,
        max_output_tokens=4_096,
        tokenizer="cl100k_base",
        tool_prompt_tokens=_CHAT_TOOL_PROMPT_4,
        estimator=_CHAT_TOOLS_4,
        basis=_CHAT_TOOLS_4_BASIS,
    ),
    ModelInfo(name="openai-embeddings", pattern=_O + "text-embedding-*", tokenizer="cl100k_base"),
    ModelInfo(
        name="openai-o-series",
        pattern=_O + "o[0-9]*",
        context_window=200_000,
        max_output_tokens=100_000,
        tokenizer="o200k_base",
        estimator={"reply": _REASONING_REPLY},
        basis={"reply": _REASONING_REPLY_FIT},
    ),
    ModelInfo(name="o1-priced", pattern=_O + "o1", prices=_openai_prices(15.0, 7.50, 60.0)),
    ModelInfo(
        name="o1-mini-priced", pattern=_O + "o1-mini", prices=_openai_prices(1.10, 0.55, 4.40)
    ),
    ModelInfo(name="o3-priced", pattern=_O + "o3", prices=_openai_prices(2.0, 0.50, 8.0)),
    ModelInfo(
        name="o3-mini-priced", pattern=_O + "o3-mini", prices=_openai_prices(1.10, 0.55, 4.40)
    ),
    ModelInfo(
        name="o4-mini-priced", pattern=_O + "o4-mini", prices=_openai_prices(1.10, 0.275, 4.40)
    ),
    ModelInfo(
        name="o-series-images",
        pattern=_O + "o[13]*",
        estimator={"image": _tiles(75, 150)},
        basis={"image": _OPENAI_VISION + " (o1 / o3: 75 + 150 per tile)"},
    ),
    ModelInfo(
        name="o4-mini-images",
        pattern=_O + "o4-mini*",
        estimator={"image": _patches(1.72)},
        basis={"image": _OPENAI_VISION + " (o4-mini: patches x 1.72)"},
    ),
    ModelInfo(
        name="gpt-5",
        pattern=_O + "gpt-5*",
        context_window=400_000,
        max_output_tokens=128_000,
        tokenizer="o200k_base",
        # Fitted on the 8 recorded gpt-5.4-mini requests (residual 0 or 1 on each, with
        # the reply primed by 2): the hidden system and developer text a request with
        # tools carries.
        tool_prompt_tokens=90,
        # On the Responses API their tool section is much shorter: 9 tokens (pooled fit
        # on the 50 gpt-5 Responses requests of the fit set; 89 put them +91 % over).
        # An assistant message with text costs 2 more (the channel of its final answer):
        # the fit set's gpt-5 requests with one were 2 ... 6 under (o-series: no data).
        estimator={
            "image": _tiles(70, 140),
            "responses_tool_prompt": 9,
            "reply": _REASONING_REPLY,
            "assistant_text": OPENAI_GPT5_ASSISTANT_TEXT_TOKENS,
        },
        basis={
            "reply": _REASONING_REPLY_FIT,
            "assistant_text": "fit: the fit set's 6 gpt-5 requests with an assistant message "
            "(Chat 2, Responses 4), 2 ... 6 under; their mean error least at 2 (4.0 % -> 0.9 %)",
            "tool_prompt_tokens": _FIT,
            "responses_tool_prompt": _FIT,
            "image": _OPENAI_VISION + " (gpt-5: 70 + 140)",
        },
    ),
    # The small gpt-5 models bill images by patches: the guide says x 1.62 / 2.46,
    # billing was measured at x 1.2 / 1.5 (community thread on gpt-5.4 mini / nano);
    # the measured figures are used.
    ModelInfo(
        name="gpt-5-mini-images",
        pattern=_O + "gpt-5*-mini*",
        estimator={"image": _patches(1.2)},
        basis={"image": "measured: community.openai.com/t/1377015 (patches x 1.2; doc 1.62)"},
    ),
    ModelInfo(
        name="gpt-5-2-images",
        pattern=_O + "gpt-5.[2-9]*",
        estimator={"image": _patches(1.2)},
        basis={"image": "measured: community.openai.com/t/1377015 (gpt-5.2+: patches x 1.2)"},
    ),
    ModelInfo(
        name="gpt-5-nano-images",
        pattern=_O + "gpt-5*-nano*",
        estimator={"image": _patches(1.5)},
        basis={"image": "measured: community.openai.com/t/1377015 (patches x 1.5; doc 2.46)"},
    ),
    ModelInfo(name="gpt-5-priced", pattern=_O + "gpt-5", prices=_openai_prices(1.25, 0.125, 10.0)),
    ModelInfo(
        name="gpt-5-mini-priced", pattern=_O + "gpt-5-mini", prices=_openai_prices(0.25, 0.025, 2.0)
    ),
    ModelInfo(
        name="gpt-5-nano-priced",
        pattern=_O + "gpt-5-nano",
        prices=_openai_prices(0.05, 0.005, 0.40),
    ),
    # Read on 2026-12-03 (the 5.2 / 5.4 releases; the corpus cassette's gpt-5.4-mini).
    ModelInfo(
        name="gpt-5.2-priced", pattern=_O + "gpt-5.2", prices=_openai_prices(1.75, 0.175, 14.0)
    ),
    ModelInfo(
        name="gpt-5.4-priced", pattern=_O + "gpt-5.4", prices=_openai_prices(2.50, 0.25, 15.0)
    ),
    ModelInfo(
        name="gpt-5.4-mini-priced",
        pattern=_O + "gpt-5.4-mini",
        prices=_openai_prices(0.75, 0.075, 4.50),
    ),
    # Google Gemini
    ModelInfo(
        name="gemini-default",
        pattern=_G + "*",
        context_window=1_048_576,
        max_output_tokens=8_192,
        tokenizer="o200k_base",
        # Before Gemini 3 a thought signature sent back is not billed (measured on
        # 2.5 Flash: python-genai issue #1129; the fit set's 2.5 requests agree).
        estimator={
            "function_part": GEMINI_FUNCTION_PART_TOKENS,
            "response_schema_text": GEMINI_RESPONSE_SCHEMA_TEXT,
            "response_schema": GEMINI_RESPONSE_SCHEMA_TOKENS,
            "pdf_page": GEMINI_PDF_PAGE_TOKENS,
            "signature_slope": 0,
            "signature_offset": 0,
            "image": GEMINI_IMAGE_RULE,
        },
        basis={
            "tokenizer": "fit: o200k, no calibration (Gemma's vocabulary is not shipped)",
            "function_part": _FIT,
            "response_schema_text": _FIT,
            "response_schema": _FIT,
            "pdf_page": "doc: Gemini tokens page (a document page is 258 tokens); the text "
            "extracted from it is flagged (document_text)",
            "signature_slope": "measured: python-genai #1129 (2.5 Flash: no input change)",
            "image": "doc: Gemini tokens page (258 per 768-px tile)",
        },
    ),
    ModelInfo(name="gemini-1.5-pro", pattern=_G + "gemini-1.5-pro*", context_window=2_097_152),
    # Gemini 2.0 reads function declarations without their JSON: their words (names,
    # descriptions, types) fit its first requests with tools (residual 0 … 7 tokens
    # where the JSON put them +36 … +128 % over), and a function part adds nothing
    # beyond its JSON (6 put the requests with one call and result 12 … 15 over).  A
    # request with declarations bills 4 tokens beyond them (_GEMINI_20_TOOL_PROMPT): refitted
    # on the fit set's 27 Gemini 2.0 requests (26 with tools, after the fifth round's 23
    # openinference ADK / google-genai calls), which the words left 0 … 12 tokens under
    # (median 5); the mean error is least at 4 (10.6 % -> 9.4 %; without the three ADK
    # multi-agent recordings, whose prompts are mostly line breaks, 5.9 % -> 4.7 %), the
    # function part staying at 0 in the joint fit.
    ModelInfo(
        name="gemini-2.0",
        pattern=_G + "gemini-2.0-*",
        tool_prompt_tokens=_GEMINI_20_TOOL_PROMPT,
        estimator={"declarations": "words", "function_part": 0},
        basis={
            "declarations": "fit: the 4 Gemini 2.0 requests with tools of the fit set",
            "function_part": "fit: the same (the 2 with a call and its result); kept at 0 by "
            "the joint refit with tool_prompt_tokens on the 27",
            "tool_prompt_tokens": "fit: the fit set's 27 Gemini 2.0 requests (26 with tools): "
            "mean error least at 4 (10.6 % -> 9.4 %)",
        },
    ),
    ModelInfo(
        name="gemini-2.5",
        pattern=_G + "gemini-2.5-*",
        max_output_tokens=65_536,
        cache_min_tokens=2_048,
    ),
    # Gemini 2.5 Flash bills the current turn's thought signature of a streamed call as
    # the thinking it carries, fewer tokens per character than Gemini 3; a call to
    # generateContent bills none (the fit set's ADK recordings, 2025-12 and 2026-04,
    # as python-genai #1129 measured).
    ModelInfo(
        name="gemini-2.5-flash",
        pattern=_G + "gemini-2.5-flash",
        estimator={
            "signature_slope": GEMINI_25_FLASH_SIGNATURE_SLOPE,
            "signature_offset": 0,
            "signature_calls": "streamed",
            "function_part": GEMINI_25_FLASH_FUNCTION_PART_TOKENS,
        },
        basis={
            "signature_slope": "fit: the fit set's 2.5 Flash signatures against the "
            "thoughtsTokenCount that made them (chatlas' streamed calls, 2026-04: each billed "
            "exactly that)",
            "function_part": "fit: the fit set's 25 Gemini 2.5 Flash requests (13 with function "
            "parts): mean error least at 12 (8.6 % -> 5.0 %; 6, the Gemini 3 fit, before)",
            "signature_calls": "fit: the fit set's 2.5 Flash calls with a signature: streamed "
            "ones (chatlas, 7) bill it, generateContent ones (ADK: openinference 2, langsmith 4) "
            "none",
        },
    ),
    ModelInfo(
        name="gemini-3",
        pattern=_G + "gemini-3*",
        max_output_tokens=65_536,
        cache_min_tokens=4_096,
        # Gemini 3 bills a thought signature sent back as the thinking it carries, an
        # image at a flat 1,120 tokens (media resolution unspecified = high), and each
        # content 1.6 tokens beyond its parts (fitted; earlier Gemini models none).
        estimator={
            "message": GEMINI_3_CONTENT_TOKENS,
            "signature_slope": GEMINI_SIGNATURE_SLOPE,
            "signature_offset": GEMINI_SIGNATURE_OFFSET,
            "image": {"kind": "fixed", "tokens": 1120},
            "pdf_page": 560,
        },
        basis={
            "message": "fit: the fit set's 15 Gemini 3 / 3.5 requests (jointly with "
            "function_part, kept at 6): mean error 4.5 % -> 2.4 %, within 8 % 13 -> 14 of 15",
            "signature_slope": "fit: the Gemini 3 signatures of the fit set against the "
            "thoughtsTokenCount that made them",
            "image": "doc: Gemini media-resolution page (Gemini 3 default: 1,120 per image)",
            "pdf_page": "doc: Gemini media-resolution page (Gemini 3 PDF default: 560 a page)",
        },
    ),
    # Gemini 3.5 bills the signatures of earlier turns too: the fit set's chatlas
    # tools_simple request with only an earlier turn's signature (500 characters) bills
    # 90 tokens over the rest, where the signature line gives 84.
    ModelInfo(
        name="gemini-3.5",
        pattern=_G + "gemini-3.5*",
        estimator={"signature_turns": "all"},
        basis={"signature_turns": "fit: the fit set's Gemini 3.5 requests with signatures"},
    ),
)
