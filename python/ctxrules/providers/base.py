"""The provider base class and the plain data it trades in.

A provider turns a commit into one vendor's request body, reads that vendor's usage
and recognises its "prompt too long" error.  Built-in providers name a ``wire``
format that the Rust renderer writes in one boundary crossing per commit.  A plugin
provider shipped outside the package leaves ``wire`` as ``None`` and overrides
``build_body``: it receives the provider-neutral ``Context`` (system blocks, messages
with paired tool calls, tools) and returns the body as a dict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from .. import _core
from ..errors import PromptTooLongError, ProviderError, RenderError, StreamError, VendorError
from ..model import Context, ContextCommit, ContextItem, ToolSpec
from .cache import CachePrediction, predict_cache
from .estimate import Estimate, EstimateFrame, PromptEstimate, estimate_generic
from .models import ModelProfile, resolve_model
from .responses import ModelResponse, error_envelope, parse_response, response_dict
from .streams import accumulate, is_event_stream
from .usage import Usage

__all__ = [
    "NativeField",
    "NativeForm",
    "NativeMember",
    "PromptTooLong",
    "Provider",
    "RenderedRequest",
    "RequestOptions",
    "SystemBlock",
    "Usage",
]


class SystemBlock(msgspec.Struct, frozen=True):
    """A system-prompt block and its stability layer: 0 session constant, 1 situation."""

    text: str
    layer: int = 0


class NativeField(msgspec.Struct, frozen=True):
    """A recorded top-level field written back as it was: its key and its value."""

    key: str
    value: msgspec.Raw


class NativeMember(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one node's content is in a recorded request (``NativeForm.nodes``).

    ``el``: the elements (``[start, end)`` of the conversation list) its own content
    came from (a tool node: its result); ``call``: those its tool call came from (a
    tool node: its caller's message); ``sys``: it is the recorded system field;
    ``bp`` / ``call_bp``: those recorded blocks carried a cache breakpoint;
    ``skip``: the request did not send it (a Responses request chained on
    ``previous_response_id`` stands for it by that id); ``call_skip``: so for its
    call (its caller's); ``args``: a tool node's arguments as its item holds them
    (its call is as recorded while they are, whatever a rule did to its result).
    """

    el: tuple[int, int] | None = None
    call: tuple[int, int] | None = None
    sys: bool = False
    bp: bool = False
    call_bp: bool = False
    skip: bool = False
    call_skip: bool = False
    args: str | None = None


class NativeForm(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The recorded form of a request a session replays (``ctxrules.render.native``).

    Rendered for ``wire`` (a provider name), the renderer writes each message whose
    items no rule changed as the recorded ``elements`` it is exactly the content of
    (``members``: how many node parts each element holds), the system field and the
    tools as recorded, and the recorded cache breakpoints instead of its own; what a
    rule changed is written in the canonical form.  ``model`` is the model the
    request named as recorded: sent again on this wire whatever family it belongs to;
    ``input_text`` a Responses ``input`` recorded as one string (its one element the
    user message it was read as).
    """

    wire: str
    model: str | None = None
    elements: tuple[msgspec.Raw, ...] = ()
    members: tuple[int, ...] = ()
    system: NativeField | None = None
    system_nodes: int = 0
    tools: msgspec.Raw | None = None
    tools_bp: bool = False
    input_text: msgspec.Raw | None = None
    nodes: dict[str, NativeMember] = {}


class RequestOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything besides the commit that shapes a request body.

    ``extra`` holds vendor body fields passed through unchanged (temperature,
    tool_choice, thinking, …); it may not set a field the renderer writes.
    ``native`` is the recorded form of the request a session replays (written back
    wherever the rules left it as it was; ``ctxrules.render.native``).
    """

    model: str
    max_tokens: int | None = None
    system: tuple[SystemBlock, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    extra: dict[str, Any] = {}
    cache: bool = True
    cache_ttl: str | None = None
    native: NativeForm | None = None


class RenderedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A rendered request: the body bytes as sent, where they go, a breakdown, and its
    billed-prompt estimate when the render was asked for one (``estimate=True``): made
    by the core with the body for the built-in wires (``RequestEstimate``), by the
    provider's ``estimate_prompt`` otherwise.  Whoever needs the request's size reads
    it here: nothing estimates a rendered request again."""

    provider: str
    model: str
    endpoint: str
    body: bytes
    meta: dict[str, Any] = {}
    estimate: Estimate | None = None


class PromptTooLong(PromptTooLongError):
    """A recognised prompt-too-long refusal; ``tokens`` / ``limit`` when the vendor said."""

    def __init__(self, message: str, *, tokens: int | None = None, limit: int | None = None):
        super().__init__(
            message,
            where="provider response",
            hint="compact the session (ctxrules compact) or choose a model with a larger window",
        )
        self.tokens = tokens
        self.limit = limit


#: Estimate frames made (``Provider.frame``): per provider, render options (their JSON)
#: and model profile, so a session's requests share one.
_FRAMES: dict[tuple[type, str, bytes, int], tuple[ModelProfile, EstimateFrame | None]] = {}
_MAX_FRAMES = 256
#: The wire options of render options objects lately rendered with (``Provider.render``),
#: by the options object's id: (provider, options, wire options, their JSON).  A
#: session's requests mostly share one options object (the engine's request layer).
_WIRED: dict[int, tuple[Provider, RequestOptions, RequestOptions, bytes]] = {}


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


#: The hint of every error about a commit the core could not read.
BAD_COMMIT = "pass a ContextCommit, or bytes that msgspec.msgpack.encode(commit) wrote"


def neutral_context(
    data: bytes | tuple[ContextItem, ...], options: RequestOptions, *, where: str
) -> Context:
    """The provider-neutral ``Context`` of a commit's items (or its MessagePack bytes) with
    the system layers and tools of ``options``: what providers without a built-in wire
    build their body from.  One crossing into the core."""
    try:
        raw = _core.render_context(data, msgspec.json.encode({"system": options.system}))
        ctx = msgspec.json.decode(raw, type=Context)
    except (ValueError, TypeError, msgspec.ValidationError) as exc:  # DecodeError: a ValueError
        raise RenderError(str(exc), where=where, hint=BAD_COMMIT) from None
    return msgspec.structs.replace(ctx, tools=options.tools)


def _refuse_stream_object(body: Any) -> None:
    """A stream object of an SDK (not yet read, or read and gone) is not an answer: say
    how to hand over the finished stream instead."""
    if isinstance(body, (Mapping, str, bytes)) or hasattr(body, "model_dump"):
        return
    if hasattr(body, "__iter__") or hasattr(body, "__aiter__"):
        raise StreamError(
            f"a {type(body).__name__} is a stream, not a finished answer",
            where="response",
            hint="pass the list of its events (events = list(stream), or collect them "
            "with StreamAccumulator as you stream), or the SDK's final message "
            "(get_final_message / get_final_completion / get_final_response)",
        )


class Provider:
    """Base class of providers; subclasses set ``name`` and override what differs.

    ``render`` is the one entry point the library calls.  Built-ins set ``wire`` and
    get Rust-written bodies; plugins override ``build_body`` instead.
    """

    name: ClassVar[str] = ""
    #: The built-in Rust wire format, or ``None`` for a body built in Python.
    wire: ClassVar[str | None] = None
    #: ``"provider"`` part of ``"provider:model"`` for ``resolve_model``.
    family: ClassVar[str] = ""
    #: Model used when neither the caller nor the session names one.
    default_model: ClassVar[str] = ""
    #: Body fields the renderer writes itself; ``extra`` may not set them.
    reserved: ClassVar[frozenset[str]] = frozenset()
    #: True when the vendor needs explicit cache breakpoints (Anthropic).
    explicit_cache: ClassVar[bool] = False
    #: Whether the vendor requires ``max_tokens`` (filled from the model's limits).
    requires_max_tokens: ClassVar[bool] = False
    #: Where this vendor's body holds the output limit, each a path of keys (Gemini
    #: nests it in ``generationConfig``): the first is where the renderer writes
    #: ``max_tokens``, later ones are older names a recorded request may use.
    max_tokens_fields: ClassVar[tuple[tuple[str, ...], ...]] = (("max_tokens",),)
    #: How the vendor caches prompts (``ctxrules.providers.cache.CACHE_RULES``):
    #: ``"none"``, explicit breakpoints or an automatic prefix cache read in steps of
    #: ``cache_step`` tokens from the model's minimum (``cache_min_tokens`` where the
    #: model table states none).
    cache_rule: ClassVar[str] = "none"
    cache_step: ClassVar[int] = 1
    cache_min_tokens: ClassVar[int | None] = None

    @property
    def model_family(self) -> str:
        """The family whose model names this provider sends: ``family``, else ``name``
        (``openai-chat`` and ``openai-responses`` send ``openai`` models)."""
        return self.family or self.name

    def model_profile(self, model: str) -> ModelProfile:
        """The profile of ``model`` as this provider sends it (``resolve_model`` of
        ``"family:model"``)."""
        return resolve_model(f"{self.model_family}:{model}")

    def endpoint(self, model: str) -> str:
        """The HTTP path the body is posted to."""
        raise NotImplementedError

    def adapt_options(self, options: RequestOptions) -> RequestOptions:
        """This vendor's reading of the neutral options, applied just before the body is
        written (e.g. Gemini moves ``max_tokens`` into ``generationConfig``)."""
        return options

    def build_body(self, context: Context, options: RequestOptions) -> dict[str, Any]:
        """Build the body from the neutral context; plugins without a ``wire`` override it."""
        raise NotImplementedError(f"provider {self.name!r} has no wire format and no build_body")

    def wire_options(self, options: RequestOptions) -> RequestOptions:
        """The options as the renderer receives them: ``extra`` checked against the
        fields the renderer writes, then ``adapt_options`` (used by ``render`` and by
        ``ctxrules.render.render_batch``)."""
        clash = sorted(set(options.extra) & self.reserved)
        if clash:
            raise ProviderError(
                f"extra body fields {clash} are written by the renderer",
                where=f"provider {self.name}",
                hint="set them through RequestOptions (system, tools, max_tokens) instead",
            )
        return self.adapt_options(options)

    def rendered(
        self,
        options: RequestOptions,
        body: bytes,
        meta: dict[str, Any],
        estimate: Estimate | None = None,
    ) -> RenderedRequest:
        """The ``RenderedRequest`` of a body rendered with ``wire_options(...)``."""
        return RenderedRequest(
            provider=self.name,
            model=options.model,
            endpoint=self.endpoint(options.model),
            body=body,
            meta=meta,
            estimate=estimate,
        )

    def estimate_frame(
        self, options: RequestOptions, profile: ModelProfile
    ) -> EstimateFrame | None:
        """What the core estimates this provider's requests with, for wire ``options``
        and ``profile`` (``ctxrules.providers.estimate.estimate_frame``); ``None``: the
        core does not estimate them, ``estimate_prompt`` does.  Built-ins fill it from
        the constants and helpers their ``estimate_prompt`` uses."""
        return None

    def frame(self, options: RequestOptions, encoded: bytes) -> EstimateFrame | None:
        """``estimate_frame`` of wire ``options`` (``encoded``: their JSON), made once
        per provider, options and model profile."""
        profile = self.model_profile(options.model)
        key = (type(self), self.name, encoded, id(profile))
        found = _FRAMES.get(key)
        if found is None or found[0] is not profile:
            if len(_FRAMES) >= _MAX_FRAMES:
                _FRAMES.clear()
            found = _FRAMES[key] = (profile, self.estimate_frame(options, profile))
        return found[1]

    def estimate_body(self, options: RequestOptions, body: bytes) -> PromptEstimate:
        """The specification's estimate of a body this provider rendered with wire
        ``options`` (for what the core does not estimate)."""
        return self.estimate_prompt(msgspec.json.decode(body), self.model_profile(options.model))

    def _wired(self, options: RequestOptions) -> tuple[RequestOptions, bytes]:
        """``wire_options(options)`` and their JSON, made once per options object while it
        is rendered with (a ``RequestOptions`` is frozen: the same object, the same
        options; its JSON's hash, the frame's key, is then computed once too)."""
        found = _WIRED.get(id(options))
        if found is not None and found[1] is options and found[0] is self:
            return found[2], found[3]
        wired = self.wire_options(options)
        encoded = msgspec.json.encode(wired)
        if len(_WIRED) >= _MAX_FRAMES:
            _WIRED.clear()
        _WIRED[id(options)] = (self, options, wired, encoded)
        return wired, encoded

    def render(
        self,
        commit: ContextCommit | bytes,
        options: RequestOptions,
        *,
        estimate: bool = False,
        renderer: _core.SessionRenderer | None = None,
    ) -> RenderedRequest:
        """Render ``commit`` into this provider's request body; with ``estimate``, its
        billed-prompt estimate too (``RenderedRequest.estimate``), made from the same
        plan in the same crossing for the built-in wires.

        ``renderer`` (a built-in wire's ``ctxrules.render.SessionRenderer`` for this
        provider's wire) renders the request incrementally: what it shares with the
        request that renderer rendered last is copied from that body, not written again.
        The bytes are the same either way; a provider without a wire ignores it."""
        options, encoded = self._wired(options)
        # Items cross as the tuple itself: the core finds those it prepared before.
        data = commit if isinstance(commit, bytes) else commit.items
        where = f"commit {commit.id}" if isinstance(commit, ContextCommit) else "commit"
        est: Estimate | None = None
        if self.wire is None:
            context = neutral_context(data, options, where=where)
            body = msgspec.json.encode(self.build_body(context, options))
            meta: dict[str, Any] = {"messages": len(context.messages), "body_bytes": len(body)}
        else:
            if renderer is not None and renderer.provider != self.wire:
                raise ProviderError(
                    f"a session renderer of {renderer.provider!r} cannot render "
                    f"{self.wire!r} requests",
                    where=f"provider {self.name}",
                    hint="keep one SessionRenderer per session and wire format",
                )
            frame = self.frame(options, encoded) if estimate else None
            try:
                if renderer is None:
                    body, raw_meta, est = _core.render_request(self.wire, data, encoded, frame)
                else:
                    body, raw_meta, est, _ = renderer.render(data, encoded, frame)
            except (ValueError, TypeError) as exc:
                raise RenderError(
                    str(exc),
                    where=where,
                    hint=BAD_COMMIT,
                ) from None
            meta = msgspec.json.decode(raw_meta)
        if estimate and est is None:
            est = self.estimate_body(options, body)
        return self.rendered(options, body, meta, est)

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        """Read the vendor's usage from a response body; ``None`` when it has none."""
        raise NotImplementedError

    def prompt_too_long(self, status: int | None, body: Any) -> PromptTooLong | None:
        """Return the error when ``(status, body)`` is this vendor's prompt-too-long
        refusal; ``body`` is the vendor's error envelope ``{"error": {...}}``, ``status``
        ``None`` when it is not known (an error body or event handed to ``record``)."""
        return None

    def vendor_error(self, status: int | None, envelope: Mapping[str, Any]) -> Exception:
        """The error a vendor's error body stands for: ``PromptTooLong`` when this
        vendor's refusal says the prompt is too long, else a ``VendorError`` with its
        type, code and message."""
        found = self.prompt_too_long(status, envelope)
        if found is not None:
            return found
        err = envelope.get("error")
        inner: Mapping[str, Any] = err if isinstance(err, Mapping) else {}
        kind = str(inner.get("type") or inner.get("status") or "")
        code = inner.get("code")
        message = str(inner.get("message") or kind or "an error without a message")
        return VendorError(
            f"{self.name} answered with an error, not an answer: {message}",
            status=status,
            type=kind,
            code="" if code is None else str(code),
            body=dict(envelope),
            where=f"{self.name} response",
            hint="nothing was recorded; handle the vendor's error (retry_after_error "
            "compacts a prompt-too-long refusal)",
        )

    def read_response(self, body: Any) -> ModelResponse:
        """Read an answer of this vendor: the assistant's blocks, its usage (raw and
        neutral), the model and the stop reason.  ``body`` is the response as received:
        a dict, JSON bytes or text, the official SDK's response object, or a finished
        stream (the list of its events, or its server-sent-event text; see
        ``ctxrules.providers.streams``).  Built-ins read their wire format; a plugin
        provider without a ``wire`` overrides this.

        Refused, so nothing is recorded: anything that is not such an answer
        (``ResponseError`` naming the field), a stream cut short or one event of a stream
        (``StreamError``), and the vendor's error body or error event, which is raised
        as the vendor's error (``vendor_error``)."""
        if self.wire is None:
            raise NotImplementedError(f"provider {self.name!r} has no read_response")
        if is_event_stream(body):
            data: Mapping[str, Any] = accumulate(self, body)
        else:
            _refuse_stream_object(body)
            data = response_dict(body)
        envelope = error_envelope(data)
        if envelope is not None:
            raise self.vendor_error(None, envelope)
        parsed = parse_response(self.wire, data)
        return msgspec.structs.replace(parsed, usage=self.parse_usage(data))

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        """Structural problems of a request body that the vendor would refuse (empty = fine)."""
        return []

    def estimate_prompt(
        self, body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
    ) -> PromptEstimate:
        """The billed prompt size of ``body`` (input + cache writes + cache reads) and its
        segments in prefix order (``ctxrules.providers.estimate``).

        ``prefix_tokens`` are tokens the caller's harness sends before this body's
        content and the body does not hold (e.g. an agent's own system prompt); they
        lead the segments.  The base class counts the body's JSON: override it with the
        vendor's rules.
        """
        return estimate_generic(body, profile, prefix_tokens=prefix_tokens)

    def predict_cache(
        self,
        previous: Estimate | None,
        current: Estimate,
        *,
        elapsed: float | None,
        profile: ModelProfile,
    ) -> CachePrediction:
        """What the vendor would read from / write to its prompt cache for ``current``,
        ``elapsed`` seconds after ``previous``, by its ``cache_rule``."""
        return predict_cache(
            self.cache_rule,
            previous,
            current,
            elapsed=elapsed,
            min_tokens=profile.cache_min_tokens or self.cache_min_tokens,
            step=self.cache_step,
        )

    # Helpers for subclasses.
    @staticmethod
    def _numbers(pattern: str, text: str) -> tuple[int | None, int | None]:
        m = re.search(pattern, text, re.IGNORECASE | re.DOTALL)
        if not m:
            return None, None
        a, b = m.group(1), m.group(2)
        return int(a.replace(",", "")), int(b.replace(",", ""))

    _int = staticmethod(_int)
