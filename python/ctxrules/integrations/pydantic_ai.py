"""Pydantic AI v2: a capability that sends the rules' view of each model request and
records what the request cost (``pip install ctxrules[pydantic-ai]``, Python ≥ 3.11).

``Agent(model, capabilities=[CtxrulesCapability(rules="default")])``:

* ``before_model_request`` gives the model the rules' view of the conversation
  (``ctxrules.engine.shape_items`` over the request's messages): parts the rules left
  full are the agent's own objects, a tool return the rules aged or cleared goes with
  its shortened text, what a summary folded goes as one user prompt with the summary.
  Only the request changes: the run's history (``ctx.messages``, ``all_messages()``)
  keeps every part as it was;
* ``after_model_request`` records the provider's usage beside our estimate of the
  request as sent (``measurements``; ``usage`` is the last as a ``UsageRecord``, with
  its calibration).

Pydantic AI owns its history, so nothing is stored in a ctxrules store here: the
conversation is the agent's (pass ``message_history`` as usual).  Instructions are not
messages in Pydantic AI and the rules do not see them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(
        "ctxrules.integrations.pydantic_ai needs Pydantic AI v2 (Python 3.11+): "
        "pip install 'ctxrules[pydantic-ai]'"
    ) from exc

import msgspec

from ..config import PipelineConfig
from ..engine import ShapedItem, shape_commit, shape_items
from ..engine.usage import UsageRecord
from ..providers import RequestOptions, get_provider, resolve_model
from ..render import estimate_request

__all__ = ["CtxrulesCapability", "Measurement", "to_chat_messages", "view"]


class Measurement(msgspec.Struct, frozen=True, kw_only=True):
    """One model request: our estimate of its messages as sent, and the provider's
    counts (``input_tokens`` is the whole prompt it billed, instructions and tools
    included, so ``calibration`` carries what the estimate cannot see)."""

    estimate: int
    input_tokens: int
    output_tokens: int
    model: str = ""

    @property
    def calibration(self) -> float | None:
        return self.input_tokens / self.estimate if self.estimate else None


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(c if isinstance(c, str) else f"[{type(c).__name__}]" for c in content)


def to_chat_messages(
    messages: list[ModelMessage],
) -> tuple[list[dict[str, Any]], list[tuple[int, int | None]]]:
    """The conversation as OpenAI Chat messages (the wire the rules read it in), and
    for each the Pydantic AI message and part it came from (``None``: the whole
    response).  Parts of other kinds are left out here and kept as they are by ``view``."""
    out: list[dict[str, Any]] = []
    origin: list[tuple[int, int | None]] = []
    for mi, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            if not text and not calls:
                continue
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            origin.append((mi, None))
            continue
        for pi, part in enumerate(message.parts):
            if isinstance(part, SystemPromptPart):
                out.append({"role": "system", "content": part.content})
            elif isinstance(part, UserPromptPart):
                out.append({"role": "user", "content": _user_text(part.content)})
            elif isinstance(part, ToolReturnPart):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "content": part.model_response_str(),
                    }
                )
            elif isinstance(part, RetryPromptPart) and part.tool_name:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "content": part.model_response(),
                    }
                )
            elif isinstance(part, RetryPromptPart):
                out.append({"role": "user", "content": part.model_response()})
            else:
                continue
            origin.append((mi, pi))
    return out, origin


def _changed(part: Any, text: str) -> Any:
    """``part`` with the rules' text in place of its content."""
    if isinstance(part, (ToolReturnPart, UserPromptPart, SystemPromptPart)):
        return dataclasses.replace(part, content=text)
    return part


def view(
    messages: list[ModelMessage],
    shaped: list[ShapedItem],
    origin: list[tuple[int, int | None]],
) -> list[ModelMessage]:
    """The messages to send: the agent's own parts where the rules left them full, the
    rules' text where they aged or cleared a part, a summary as a user prompt; a
    response goes as it was (its tool calls stay paired)."""
    shown: dict[int, dict[int | None, Any]] = {}
    order: list[Any] = []  # a message index, or a message made for a summary
    for s in shaped:
        it = s.item
        if s.first is None:
            made: ModelMessage
            if it.role == "tool" and it.tool_use_id:  # a call answered as not run
                made = ModelRequest(
                    parts=[
                        ToolReturnPart(
                            tool_name=it.name, content=it.rendered, tool_call_id=it.tool_use_id
                        )
                    ]
                )
            else:
                made = ModelRequest(parts=[UserPromptPart(content=it.rendered)])
            order.append(made)
            continue
        mi, pi = origin[s.first]
        if mi not in shown:
            shown[mi] = {}
            order.append(mi)
        shown[mi][pi] = None if it.state == "full" else it.rendered
    out: list[ModelMessage] = []
    for entry in order:
        if not isinstance(entry, int):
            out.append(entry)
            continue
        message = messages[entry]
        parts_shown = shown[entry]
        if isinstance(message, ModelResponse):
            out.append(message)
            continue
        converted = {pi for mi, pi in origin if mi == entry}
        parts = []
        for pi, part in enumerate(message.parts):
            if pi not in converted:
                parts.append(part)  # a kind the rules do not read: as it is
            elif pi in parts_shown:
                text = parts_shown[pi]
                parts.append(part if text is None else _changed(part, text))
        if parts:
            out.append(dataclasses.replace(message, parts=parts))
    return out


@dataclass
class CtxrulesCapability(AbstractCapability[Any]):
    """Shapes each model request and records its usage (see the module docstring).

    ``rules``: a preset name or a ``PipelineConfig`` (default: the default preset);
    ``provider`` / ``model``: what our estimate of a request is counted for
    (``provider:model``, as ``ctxrules.resolve_model`` reads it).
    """

    rules: str | PipelineConfig | None = None
    provider: str = "openai-chat"
    model: str = "gpt-4o"
    measurements: list[Measurement] = field(default_factory=list)
    _pending: dict[Any, int] = field(default_factory=dict, repr=False)

    @property
    def usage(self) -> UsageRecord | None:
        """The last request's usage record: the provider's count beside our estimate."""
        if not self.measurements:
            return None
        m = self.measurements[-1]
        window = resolve_model(f"{get_provider(self.provider).model_family}:{self.model}")
        return UsageRecord.measured(window.context_window, m.input_tokens, m.estimate)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        chat, origin = to_chat_messages(list(request_context.messages))
        if not chat:
            return request_context
        shaped = shape_items(chat, provider=self.provider, rules=self.rules, unanswered="not_run")
        messages = view(list(request_context.messages), shaped, origin)
        sent, _ = to_chat_messages(messages)
        self._pending[_key(ctx)] = self._estimate(sent)
        return dataclasses.replace(request_context, messages=messages)

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        estimate = self._pending.pop(_key(ctx), None)
        usage = response.usage
        if estimate is not None and usage.input_tokens:
            self.measurements.append(
                Measurement(
                    estimate=estimate,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    model=response.model_name or "",
                )
            )
        return response

    def _estimate(self, chat: list[dict[str, Any]]) -> int:
        prov = get_provider(self.provider)
        commit = shape_commit(chat, provider=prov, rules="off", unanswered="not_run")
        rendered = prov.render(commit, RequestOptions(model=self.model, cache=False))
        return estimate_request(rendered, prov).input_tokens


def _key(ctx: RunContext[Any]) -> Any:
    return (getattr(ctx, "run_id", None), getattr(ctx, "run_step", 0))
