"""LangChain v1: an agent middleware that sends the rules' view of the conversation to
the model (``pip install ctxrules[langchain]``, Python ≥ 3.11).

``create_agent(model, tools, middleware=[CtxrulesMiddleware(rules="default")])``: on every
model call (``wrap_model_call``, and ``awrap_model_call`` for ``ainvoke``) the request's
messages are shaped (``ctxrules.engine.shape_items``) and handed on with
``request.override(messages=…)`` — a view: the graph's state keeps every message as it
was, and what the model reads is the agent's own message objects where the rules left
them full, a tool message the rules aged or cleared with its shortened text, what a
summary folded as one human message with the summary.  An AI message goes as it was
(its tool calls stay paired).  The system message is LangChain's own and stays as it is.

LangChain owns the conversation (its state and checkpointer): nothing is stored in a
ctxrules store here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        HumanMessage,
        ToolMessage,
        convert_to_openai_messages,
    )
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(
        "ctxrules.integrations.langchain needs LangChain v1 (Python 3.11+): "
        "pip install 'ctxrules[langchain]'"
    ) from exc

from ..config import PipelineConfig
from ..engine import shape_items

__all__ = ["CtxrulesMiddleware", "view_messages"]


def view_messages(
    messages: list[AnyMessage], rules: str | PipelineConfig | None = None
) -> list[AnyMessage]:
    """The messages a model call sends under ``rules`` (see the module docstring); the
    list given is not changed."""
    chat = convert_to_openai_messages(messages)
    if not isinstance(chat, list) or len(chat) != len(messages) or not chat:
        return list(messages)  # a message LangChain spreads over several: left as it is
    out: list[AnyMessage] = []
    sent: set[int] = set()
    for s in shape_items(chat, provider="openai-chat", rules=rules, unanswered="not_run"):
        it = s.item
        if s.first is None:
            if it.role == "tool" and it.tool_use_id:  # a call answered as not run
                out.append(
                    ToolMessage(content=it.rendered, tool_call_id=it.tool_use_id, status="error")
                )
            else:
                out.append(HumanMessage(content=it.rendered))
            continue
        if s.first in sent:
            continue
        sent.add(s.first)
        original = messages[s.first]
        if it.state == "full" or isinstance(original, AIMessage):
            out.append(original)
        else:
            out.append(original.model_copy(update={"content": it.rendered}))
    return out


class CtxrulesMiddleware(AgentMiddleware[Any, Any]):
    """Sends the rules' view of the messages to the model (see the module docstring).
    ``rules``: a preset name or a ``PipelineConfig`` (default: the default preset)."""

    def __init__(self, rules: str | PipelineConfig | None = None) -> None:
        super().__init__()
        self.rules = rules

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        return handler(request.override(messages=view_messages(request.messages, self.rules)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        return await handler(request.override(messages=view_messages(request.messages, self.rules)))
