"""LiteLLM: shape the messages of every call (``pip install ctxrules[litellm]``).

``litellm.callbacks = [CtxrulesLogger(rules="default")]`` shapes the messages of each
async call (``litellm.acompletion``) before it goes out: the logger's
``async_pre_call_deployment_hook`` — the one hook of LiteLLM's library path that may
change a request — hands back the call's arguments with ``messages`` shaped
(``ctxrules.shape`` over the OpenAI Chat messages LiteLLM takes, whatever the model's
vendor: LiteLLM translates them afterwards).  LiteLLM's synchronous ``completion`` has no
such hook; call ``ctxrules.integrations.litellm.completion(...)`` instead, which shapes
and then calls it.  LiteLLM keeps no history: the caller's list is never changed.

Install LiteLLM 1.83 or later (1.82.7 and 1.82.8 carried a credential stealer), and set
``LITELLM_LOCAL_MODEL_COST_MAP=True`` where nothing may be downloaded: LiteLLM fetches
its model price list when it is imported otherwise.
"""

from __future__ import annotations

from typing import Any

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(
        "ctxrules.integrations.litellm needs LiteLLM: pip install 'ctxrules[litellm]'"
    ) from exc

from ..config import PipelineConfig
from ..engine import shape

__all__ = ["CtxrulesLogger", "completion", "shaped_messages"]


def _plain(message: Any) -> Any:
    if isinstance(message, dict):
        return message
    dump = getattr(message, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else message


def shaped_messages(
    messages: list[Any], rules: str | PipelineConfig | None = None
) -> list[dict[str, Any]]:
    """``messages`` (OpenAI Chat, as LiteLLM takes them) shaped by ``rules``; a call
    without its result is answered as not run in the request."""
    return shape(
        [_plain(m) for m in messages], provider="openai-chat", rules=rules, unanswered="not_run"
    )


class CtxrulesLogger(CustomLogger):
    """Shapes the messages of each async LiteLLM call (see the module docstring)."""

    def __init__(self, rules: str | PipelineConfig | None = None) -> None:
        super().__init__()
        self.rules = rules

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        messages = kwargs.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        return {**kwargs, "messages": shaped_messages(messages, self.rules)}


def completion(*args: Any, rules: str | PipelineConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with its ``messages`` shaped by ``rules`` first."""
    if isinstance(kwargs.get("messages"), list):
        kwargs["messages"] = shaped_messages(kwargs["messages"], rules)
    return litellm.completion(*args, **kwargs)
