"""Built-in importers, registered through the ``ctxrules`` entry points like any plugin.

Registration order is the order ``--format auto`` tries them: specific containers
(Claude Code lines, SWE-agent, OpenHands, cassettes) before the generic message lists.
"""

from __future__ import annotations

from ..hookspecs import RegisterImporters, hookimpl
from .anthropic import AnthropicMessagesImporter
from .cassette import CassetteImporter
from .claude_code import ClaudeCodeImporter
from .codex import CodexRolloutImporter
from .gemini_cli import GeminiCliImporter
from .openai_chat import OpenAIChatImporter
from .openai_responses import OpenAIResponsesImporter
from .openhands import OpenHandsImporter
from .swe_agent import SweAgentImporter
from .traffic import TrafficImporter


@hookimpl
def register_importers(register: RegisterImporters) -> None:
    register(ClaudeCodeImporter())
    register(CodexRolloutImporter())
    register(GeminiCliImporter())
    register(SweAgentImporter())
    register(OpenHandsImporter())
    register(CassetteImporter("last"))
    register(CassetteImporter("all"))
    register(TrafficImporter())
    register(OpenAIResponsesImporter())
    register(AnthropicMessagesImporter())
    register(OpenAIChatImporter())
