"""Apply mode: the request rendered from the session's commit under the rules is sent
instead of the agent's, and Anthropic ``count_tokens`` is answered locally.

For each conversation call the request's nodes are written first (on the recorder's
writer thread, so one thread writes the store), the commit at the request's last node
is made under the rules (``ctxrules.commit.make_commit``; the cache-aware rules at the
prices of the request's model, ``CachePricing.for_model``) and rendered for the wire
the agent spoke (``ctxrules.render.render``) with the options the request itself
carries (``ctxrules.render.session_defaults`` of its defaults: its model, tools and
parameters; its system prompt is the history's system node).  The renderer composes
the body by stability — tools and system first, then the conversation — and puts the
cache breakpoints at those layers, so the cached prefix stays the same from one
request to the next.  ``stream`` and ``stream_options`` stay as the agent asked, so
its client reads the answer it expects.  A request the rules cannot render is sent
as the agent sent it, and the failure is reported.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ..commit import Pipeline, make_commit
from ..config import PipelineConfig
from ..errors import CtxrulesError
from ..importers._defaults import request_defaults
from ..importers.traffic import exchange_of, gemini_model
from ..providers import RenderedRequest, get_provider
from ..render import estimate_request, render, session_defaults
from ..ruleapi.cache import CachePricing
from ._recorder import Recorder

__all__ = ["Applier", "count_tokens"]


def count_tokens(body: bytes) -> tuple[int, bytes]:
    """Anthropic ``POST /v1/messages/count_tokens`` answered from the estimator:
    ``(status, JSON body)``; the count covers system, tools and messages."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        message = "count_tokens needs a JSON body with messages"
        err = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        return 400, json.dumps(err).encode()
    rendered = RenderedRequest(
        provider="anthropic",
        model=str(data.get("model", "")),
        endpoint="/v1/messages/count_tokens",
        body=body,
    )
    estimate = estimate_request(rendered, "anthropic")
    return 200, json.dumps({"input_tokens": estimate.input_tokens}).encode()


class Applier:
    """Renders apply mode's requests (see the module docstring)."""

    def __init__(
        self, recorder: Recorder, config: PipelineConfig | None = None, *, log: Any = None
    ):
        self.recorder = recorder
        self.pipeline = Pipeline.from_config(config)
        self.log = log

    async def prepare(
        self, path: str, body: bytes, headers: list[tuple[str, str]]
    ) -> tuple[bytes, list[tuple[str, str]], dict[str, Any] | None]:
        """The body and headers to send for an agent's request, and what was sent
        (``None``: the agent's own request goes, unchanged)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, self.recorder.run_in_writer, lambda: self._render(path, body, headers)
        )

    def _render(
        self, path: str, body: bytes, headers: list[tuple[str, str]]
    ) -> tuple[bytes, list[tuple[str, str]], dict[str, Any] | None]:
        at = time.time()
        lower = {k.lower(): v for k, v in headers}
        ex = exchange_of(path, body, lower, 0, b"", {}, at=at)
        if ex is None:
            return body, headers, None
        try:
            step = self.recorder.write_request(ex)
            if step.head is None:
                return body, headers, None
            store = self.recorder.store
            defaults = request_defaults(ex.request, ex.provider, model=gemini_model(path))
            options = session_defaults(defaults, ex.provider).options
            # The cache-aware rules price a rewrite at the cache of the model sent to
            # (and a commit made at its prices is not reused at another's).
            model = str(options.get("model", ""))
            priced = CachePricing.for_model(get_provider(ex.provider), model)
            commit = make_commit(
                step.session_id,
                step.head,
                now=at,
                store=store,
                config=self.pipeline.priced(priced, model),
            )
            rendered = render(commit, ex.provider, **options)
            estimate = estimate_request(rendered, ex.provider).input_tokens
        except CtxrulesError as exc:
            if self.log is not None:
                self.log(
                    f"ctxrules proxy: {path}: the rules could not render it ({exc}): sent as is"
                )
            return body, headers, {"error": str(exc)}
        out = json.loads(rendered.body)
        for key in ("stream", "stream_options"):
            if key in ex.request:
                out[key] = ex.request[key]
        sent = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
        kept = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
        return (
            sent,
            kept,
            {
                "session": step.session_id,
                "head": step.head,
                "commit": commit.id,
                "bytes": len(sent),
                "original_bytes": len(body),
                "estimate": estimate,
            },
        )
