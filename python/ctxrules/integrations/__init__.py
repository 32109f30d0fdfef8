"""Adapters for the frameworks agents are written in, each an optional extra.

Import the one you use (each imports its framework, so ``import ctxrules`` and this
package import none):

* ``ctxrules.integrations.openai_agents`` (``ctxrules[openai-agents]``): ``CtxrulesSession``,
  an OpenAI Agents SDK ``Session`` keeping the history in the graph, and
  ``shaped_input``, a ``RunConfig.call_model_input_filter`` sending the shaped input;
* ``ctxrules.integrations.pydantic_ai`` (``ctxrules[pydantic-ai]``, Python ≥ 3.11):
  ``CtxrulesCapability``, shaping each model request and recording its usage;
* ``ctxrules.integrations.langchain`` (``ctxrules[langchain]``, Python ≥ 3.11):
  ``CtxrulesMiddleware``, an ``AgentMiddleware`` sending the shaped messages as a view;
* ``ctxrules.integrations.claude_agent_sdk`` (``ctxrules[claude-agent-sdk]``):
  ``CtxrulesSessionStore``, mirroring Claude Code's transcript into the graph, and
  ``pre_compact_hook``, compaction instructions that keep the task and identifiers;
* ``ctxrules.integrations.litellm`` (``ctxrules[litellm]``): ``CtxrulesLogger``, a
  ``CustomLogger`` shaping each async call, and ``completion`` for sync calls.

What each supports and cannot do is in docs/integrations.md.
"""

from __future__ import annotations

__all__: list[str] = []
