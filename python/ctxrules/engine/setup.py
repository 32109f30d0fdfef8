"""What a session the engine serves remembers of its requests: provider, model, system
prompt, tools and parameters, in the session metadata every command reads.

``ctxrules stats``, ``render --for``, ``explain``, the viewer and the batch replay all
take a stored session's request setup from its metadata (``ctxrules.render.
recorded_request``: the keys importers fill from a recording).  The engine fills the same
keys for the sessions it makes, from each request it prepares: ``provider``, ``model``
(as sent), ``tools`` (the declarations as sent, in the vendor's shape), ``params`` (the
body's other fields: ``max_tokens``, ``temperature``, …) and ``system`` — the list of the
system prompt's parts as sent, which the history does not hold (a list tells the
readers so: ``recorded_request(...).system_sent``).  ``recorded_by`` says ctxrules
wrote them (the engine, or an adapter of ``ctxrules.integrations`` through
``remember``), so the engine never reads its own parameters back as if they were a
recording's (a setting removed from its configuration stays removed), and a session
imported from a recording keeps the recording's setup: its requests were not the
engine's.  A key is written only when it changed, so a turn costs no write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ..importers._defaults import NOT_PARAMS
from ..providers import RenderedRequest
from ..render import recorded_request
from ..store import CommitStore
from .results import SystemPrompt

__all__ = ["ENGINE", "RECORDED_BY", "engine_made", "remember", "remember_setup", "setup_of"]

#: The metadata key naming who wrote the session's request setup, and the engine's value.
RECORDED_BY = "recorded_by"
ENGINE = "ctxrules.engine"


def engine_made(metadata: Mapping[str, Any]) -> bool:
    """Whether the session's request setup is the engine's own record (or there is none
    yet): the engine may write it, and must not read its parameters back."""
    if metadata.get(RECORDED_BY) == ENGINE:
        return True
    rec = recorded_request(metadata)
    return not (rec.system or rec.tools is not None or rec.provider or rec.params)


#: A body's top-level fields, each left undecoded until asked for.
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])


def setup_of(provider: str, rendered: RenderedRequest, system: SystemPrompt) -> dict[str, Any]:
    """The setup of one prepared request, as the session metadata keeps it.  Only the
    tools and the parameters are decoded from the body: the conversation, which grows
    every turn, is skipped over, not read into Python."""
    fields = _FIELDS.decode(rendered.body)
    tools = fields.get("tools")
    setup: dict[str, Any] = {
        RECORDED_BY: ENGINE,
        "provider": provider,
        "model": rendered.model,
        "system": system.texts(),
        "tools": (msgspec.json.decode(tools) if tools is not None else None) or [],
        "params": {k: msgspec.json.decode(v) for k, v in fields.items() if k not in NOT_PARAMS},
    }
    return setup


def remember_setup(
    store: CommitStore,
    session: str,
    provider: str,
    rendered: RenderedRequest,
    system: SystemPrompt,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write the request's setup into ``session``'s metadata where it changed — unless the
    session's setup is a recording's (see the module docstring).  ``metadata``: the
    session's metadata as the caller just read it (the engine reads the session once per
    step); by default it is read here."""
    if metadata is None:
        metadata = store.get_session(session).metadata
    if not engine_made(metadata):
        return  # a recording's setup: nothing to read out of the body
    remember(store, session, setup_of(provider, rendered, system), metadata=metadata)


def remember(
    store: CommitStore,
    session: str,
    setup: Mapping[str, Any],
    *,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write ``setup`` (``provider``, ``model``, ``system``, ``tools``, ``params``: those
    known) into ``session``'s metadata where it changed, marked as ctxrules' own —
    unless the session's setup is a recording's.  ``metadata`` as in ``remember_setup``."""
    if metadata is None:
        metadata = store.get_session(session).metadata
    if not engine_made(metadata):
        return
    patch = {k: v for k, v in {**setup, RECORDED_BY: ENGINE}.items() if metadata.get(k) != v}
    if patch:
        store.update_metadata(session, patch)
