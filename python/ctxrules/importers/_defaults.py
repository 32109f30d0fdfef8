"""The request defaults a recording holds, as session metadata (docs/sessions.md).

Importers fill these keys of the session metadata where their format records them, so
a renderer can send a session's requests as the agent sent them:

* ``system`` (str): the system prompt, where the format keeps it in a field of its own
  (an Anthropic ``system``, a Gemini ``systemInstruction`` or, as Google's SDKs log it,
  ``system_instruction``); system messages inside a history stay system nodes;
* ``tools`` (list): the tool declarations as recorded, in the vendor's shape;
* ``model`` (str): the session's model: the first assistant node's (``SessionBuilder``
  fills it), unless the importer recorded one;
* ``provider`` (str): the wire the recording came from when it is known:
  ``anthropic``, ``openai-chat``, ``openai-responses`` or ``gemini``;
* ``params`` (dict): the other request parameters in that provider's shape
  (``max_tokens``, ``tool_choice``, ``thinking``, ``generationConfig``, …).

Nothing is made up: a key is absent when the recording does not hold it.
"""

from __future__ import annotations

from typing import Any

from ..providers.gemini import one_or_list

__all__ = [
    "NOT_PARAMS",
    "PROVIDERS",
    "SYNTHETIC_MODELS",
    "WIRE_PROVIDERS",
    "one_or_list",
    "request_defaults",
    "system_text",
]

#: The provider wires a recording can come from.
PROVIDERS = ("anthropic", "openai-chat", "openai-responses", "gemini")
#: A cassette's ``wire`` (the kind of API its importer recognised) → the provider it
#: recorded.
WIRE_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai-chat",
    "openai-responses": "openai-responses",
    "gemini": "gemini",
}

#: Request keys that are not ``params``: the conversation, its system prompt (Gemini's
#: in either spelling), tools and model have keys of their own, and streaming is how a
#: client read the answer, not what it asked (``stream_options`` is only valid with
#: ``stream``).
NOT_PARAMS = frozenset(
    {
        "model",
        "system",
        "systemInstruction",
        "system_instruction",
        "instructions",
        "tools",
        "messages",
        "contents",
        "input",
        "stream",
        "stream_options",
    }
)

#: Model names Claude Code writes on messages it made itself (no request was sent).
SYNTHETIC_MODELS = frozenset({"<synthetic>"})


def system_text(system: Any) -> str:
    """The text of a recorded system prompt: a string, or the ``text`` of its blocks /
    parts joined by newlines (as the system node of the same request holds it)."""
    if isinstance(system, str):
        return system
    if isinstance(system, dict):  # Gemini: {"parts": [...]} (or one part)
        system = one_or_list(system.get("parts"))
    if isinstance(system, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in system)
    return ""


def request_defaults(body: dict[str, Any], provider: str, *, model: str = "") -> dict[str, Any]:
    """The defaults of one recorded request body of ``provider``'s wire.

    ``model`` stands in when the body names none (Gemini puts it in the URL).
    """
    out: dict[str, Any] = {"provider": provider}
    if provider == "gemini":
        raw = body.get("systemInstruction", body.get("system_instruction"))
    elif provider == "openai-responses":
        raw = body.get("instructions")
    else:
        raw = body.get("system")
    text = system_text(raw)
    if text:
        out["system"] = text
    if isinstance(body.get("tools"), list):
        out["tools"] = body["tools"]
    elif provider == "gemini" and isinstance(body.get("tools"), dict):
        out["tools"] = one_or_list(body["tools"])  # one Tool object sent alone
    recorded = body.get("model")
    name = recorded if isinstance(recorded, str) and recorded else model
    if name:
        out["model"] = name
    params = {k: v for k, v in body.items() if k not in NOT_PARAMS}
    if params:
        out["params"] = params
    return out
