"""The model-backed summarizer: one request per summary, sent with the vendor's SDK.

The request is the side path of a turn: a system text and one user message (the
transcript and the instructions, ``prompt``), no tools and no history, rendered by
ctxrules for the configured provider (``ctxrules.render.render_side_request``) and
sent with the official SDK (``anthropic`` for ``anthropic``, ``openai`` for
``openai-chat`` and ``openai-responses``) with the SDK's retries off:
``ctxrules.summarizers.run_summarizer`` owns the retry policy.  Errors, as
``run_summarizer`` reads them:

- the provider's prompt-too-long refusal (``Provider.prompt_too_long``) →
  ``PromptTooLongError``: the caller drops the oldest round and asks again;
- 401 / 403 → ``ConfigError`` (a wrong key stays wrong: not retried);
- any other HTTP error, a dropped connection or a time-out → ``SummarizerError``
  (retried);
- an answer without text → ``""``: the summary is refused and nothing is folded.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ctxrules.errors import ConfigError, SummarizerError
from ctxrules.model import ContextItem
from ctxrules.providers import Provider, get_provider, resolve_model

from .prompt import SYSTEM, user_message

__all__ = ["ENV_PREFIX", "PROVIDERS", "LLMConfig", "LLMSummarizer"]

#: Providers this summarizer can send to, and the variable their key is read from by
#: default.
PROVIDERS: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-chat": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}
#: ``LLMConfig.from_env`` reads ``CTXRULES_LLM_SUMMARIZER_<FIELD>``.
ENV_PREFIX = "CTXRULES_LLM_SUMMARIZER_"
#: The name registered when none is configured.
DEFAULT_NAME = "llm"
#: Output limit used when none is configured (capped by the model's own).
DEFAULT_MAX_TOKENS = 8192
#: Share of the window the transcript may fill: item token counts come from the
#: session's tokenizer, not the model's, and the transcript adds a label per item.
INPUT_MARGIN = 0.9


class LLMConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How the summarizer reaches its model.

    ``provider`` is one of ``PROVIDERS``; ``model`` defaults to the provider's default
    model; ``base_url`` to the SDK's (the vendor's API); the key is read from the
    environment variable ``api_key_env`` (default: ``ANTHROPIC_API_KEY`` or
    ``OPENAI_API_KEY``) when a summary is asked for, never stored.  ``max_tokens`` is
    the answer's limit (default ``DEFAULT_MAX_TOKENS``, capped by the model's output
    limit); ``timeout`` the seconds one HTTP request may take; ``name`` the name the
    summarizer is registered and chosen under (``rules.summarize.summarizer``).
    """

    provider: str = "anthropic"
    model: str = ""
    base_url: str | None = None
    api_key_env: str = ""
    max_tokens: int | None = None
    timeout: float = 120.0
    name: str = DEFAULT_NAME

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig:
        """The configuration in ``CTXRULES_LLM_SUMMARIZER_PROVIDER``, ``_MODEL``,
        ``_BASE_URL``, ``_API_KEY_ENV``, ``_MAX_TOKENS``, ``_TIMEOUT`` and ``_NAME``;
        ``ConfigError`` names the variable holding a bad value."""
        env = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        for field in cls.__struct_fields__:
            value = env.get(ENV_PREFIX + field.upper(), "").strip()
            if value:
                raw[field] = value
        try:
            return msgspec.convert(raw, cls, strict=False)
        except msgspec.ValidationError as exc:
            field = str(exc).rsplit("$.", 1)[-1].rstrip("`") if "$." in str(exc) else ""
            raise ConfigError(
                str(exc),
                where=f"${ENV_PREFIX}{field.upper()}" if field else "environment",
                hint="max_tokens is an integer, timeout a number of seconds",
            ) from None

    def check(self) -> None:
        """``ConfigError`` when the provider is not one of ``PROVIDERS`` or a limit is
        not positive."""
        if self.provider not in PROVIDERS:
            raise ConfigError(
                f"the llm summarizer cannot send to provider {self.provider!r}",
                where=f"${ENV_PREFIX}PROVIDER",
                hint=f"one of {', '.join(PROVIDERS)}",
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError("max_tokens must be >= 1", where=f"${ENV_PREFIX}MAX_TOKENS")
        if self.timeout <= 0:
            raise ConfigError("timeout must be > 0 seconds", where=f"${ENV_PREFIX}TIMEOUT")


class LLMSummarizer:
    """A summarizer that asks a model (see the module docstring).

    ``max_input_tokens`` is what the model's window (``ctxrules.resolve_model``) leaves
    after the answer's ``max_tokens`` and the prompt, times ``INPUT_MARGIN``; over it,
    ``run_summarizer`` hands the items over in chunks.  ``None`` when the configuration
    is unusable (the call then fails with the reason).
    """

    def __init__(self, config: LLMConfig | None = None) -> None:
        self._config = config
        env_name = os.environ.get(ENV_PREFIX + "NAME", "").strip()
        self.name = config.name if config is not None else env_name or DEFAULT_NAME
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def config(self) -> LLMConfig:
        """The configuration given, or else the environment's, read on first use (a bad
        value then fails the summary, not the loading of plugins)."""
        if self._config is None:
            self._config = LLMConfig.from_env()
        return self._config

    # -- configuration -----------------------------------------------------------------

    @property
    def provider(self) -> Provider:
        """The ctxrules provider the request is rendered for."""
        self.config.check()
        return get_provider(self.config.provider)

    @property
    def model(self) -> str:
        """The configured model, or the provider's default."""
        return self.config.model or self.provider.default_model

    def max_tokens(self) -> int:
        """The answer's token limit: the configured one, capped by the model's."""
        profile = resolve_model(f"{self.config.provider}:{self.model}")
        wanted = self.config.max_tokens or DEFAULT_MAX_TOKENS
        return min(wanted, profile.max_output_tokens)

    @property
    def max_input_tokens(self) -> int | None:
        """The most item tokens one request carries (see the class docstring)."""
        try:
            profile = resolve_model(f"{self.config.provider}:{self.model}")
            prompt = profile.estimate_tokens([SYSTEM, user_message((), budget=0)])
            room = profile.context_window - self.max_tokens() - prompt
        except Exception:  # unusable configuration: summarize() raises the reason
            return None
        return max(1, int(room * INPUT_MARGIN))

    # -- the call ----------------------------------------------------------------------

    def request_body(
        self, items: Sequence[ContextItem], *, budget: int, instructions: str = ""
    ) -> dict[str, Any]:
        """The request body: system text and one user message, rendered by ctxrules for
        the configured provider (``ctxrules.render.render_side_request``: no tools, no
        history, no prompt cache breakpoints)."""
        from ctxrules.render import render_side_request

        rendered = render_side_request(
            self.provider,
            self.model,
            SYSTEM,
            user_message(items, budget=budget, instructions=instructions),
            max_tokens=self.max_tokens(),
        )
        body: dict[str, Any] = json.loads(rendered.body)
        return body

    def summarize(
        self, items: Sequence[ContextItem], *, budget: int, instructions: str = ""
    ) -> str:
        """The model's summary of ``items`` in about ``budget`` tokens (errors: see the
        module docstring)."""
        body = self.request_body(items, budget=budget, instructions=instructions)
        client = self._sdk_client()
        sdk = _sdk(self.config.provider)
        try:
            if self.config.provider == "anthropic":
                message = client.messages.create(**body)
                return "".join(b.text for b in message.content if b.type == "text").strip()
            if self.config.provider == "openai-chat":
                completion = client.chat.completions.create(**body)
                choices = completion.choices
                return (choices[0].message.content or "").strip() if choices else ""
            response = client.responses.create(**body)
            return (response.output_text or "").strip()
        except sdk.APIStatusError as exc:
            raise self._status_error(exc) from None
        except sdk.APIConnectionError as exc:  # includes the SDK's time-out
            raise SummarizerError(
                f"{type(exc).__name__}: {exc}",
                where=f"llm summarizer ({self.config.provider})",
                hint="transient: run_summarizer retries it",
            ) from None

    def _status_error(self, exc: Any) -> Exception:
        status = int(exc.status_code)
        try:
            body = exc.response.json()  # the whole body: the SDKs keep only a part
        except ValueError:
            body = exc.body
        too_long = self.provider.prompt_too_long(status, body)
        if too_long is not None:
            return too_long
        where = f"llm summarizer ({self.config.provider} {self.model})"
        if status in (401, 403):
            return ConfigError(
                f"HTTP {status}: {exc}",
                where=where,
                hint=f"check the key in ${self._key_env()} and its permissions",
            )
        return SummarizerError(
            f"HTTP {status}: {exc}", where=where, hint="transient: run_summarizer retries it"
        )

    def _key_env(self) -> str:
        return self.config.api_key_env or PROVIDERS.get(self.config.provider, "")

    def _sdk_client(self) -> Any:
        """The SDK client, made on first use (the key is read then)."""
        with self._lock:
            if self._client is None:
                self.config.check()
                key = os.environ.get(self._key_env(), "")
                if not key:
                    raise ConfigError(
                        f"no API key in ${self._key_env()}",
                        where=f"llm summarizer ({self.config.provider})",
                        hint=f"export {self._key_env()}=… or set ${ENV_PREFIX}API_KEY_ENV",
                    )
                cls = (
                    _sdk("anthropic").Anthropic
                    if self.config.provider == "anthropic"
                    else _sdk("openai").OpenAI
                )
                self._client = cls(
                    api_key=key,
                    base_url=self.config.base_url,
                    timeout=self.config.timeout,
                    max_retries=0,  # run_summarizer retries
                )
            return self._client


def _sdk(provider: str) -> Any:
    """The SDK module of a provider, imported on first use (not when plugins load)."""
    if provider == "anthropic":
        import anthropic

        return anthropic
    import openai

    return openai
