"""One exception hierarchy for ctxrules.

Every error says what was wrong, where (file, line, node id, field) and, through
``hint``, what the caller can do about it.  The CLI prints ``str(err)`` on one line
and exits non-zero; it never shows a traceback for a ``CtxrulesError``.
"""

from __future__ import annotations

__all__ = [
    "AgentRunActiveError",
    "AmbiguousIdError",
    "CompactionDeclined",
    "CompactionError",
    "ConfigError",
    "CtxrulesError",
    "CtxrulesWarning",
    "DagError",
    "EmptyTranscriptError",
    "ImportFormatError",
    "NotFoundError",
    "PluginError",
    "PluginWarning",
    "PromptTooLongError",
    "ProviderError",
    "RenderError",
    "ResponseError",
    "RuleError",
    "StoreError",
    "StreamError",
    "SummarizerError",
    "TokenizerError",
    "TranscriptWarning",
    "UnansweredToolCallsError",
    "ValidationError",
    "VendorError",
]


class CtxrulesError(Exception):
    """Base class of every error ctxrules raises on purpose.

    ``where`` names the place (file:line, node id, field path); ``hint`` says what to do.
    """

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class ValidationError(CtxrulesError):
    """Data does not match the model: a wrong field, type or value."""


class ConfigError(CtxrulesError):
    """A configuration file or parameter is invalid."""


class PluginError(CtxrulesError):
    """A plugin failed to load, registered something invalid, or is unknown."""


class TokenizerError(CtxrulesError):
    """An unknown encoding or a tokenizer that cannot count the given input."""


class StoreError(CtxrulesError):
    """The store cannot be opened, is of an unknown schema, or refused a write."""


class NotFoundError(StoreError):
    """A session, node or commit id that the store does not hold."""


class DagError(CtxrulesError):
    """An operation would break a rule of the history graph."""


class AgentRunActiveError(DagError):
    """Edit or retry was asked for while an agent run is active on the session."""


class UnansweredToolCallsError(DagError):
    """The input would leave tool calls of the model's answer without a result (they
    would be dropped from the request); ``calls`` lists their ids.  Nothing was stored."""

    def __init__(
        self,
        message: str,
        *,
        calls: list[str],
        where: str | None = None,
        hint: str | None = None,
    ):
        self.calls = calls
        super().__init__(message, where=where, hint=hint)


class ImportFormatError(CtxrulesError):
    """A transcript could not be imported; nothing was written."""


class EmptyTranscriptError(ImportFormatError):
    """A file of a known format holds no conversation to import (a recording without a
    model call, a session of notices only).  Named on its own it is an error; a directory
    import skips it and lists it with this reason."""


class RuleError(CtxrulesError):
    """A rule broke its contract or was configured wrongly."""


class SummarizerError(CtxrulesError):
    """A summarizer failed; callers fall back to keeping content unfolded."""


class CompactionError(CtxrulesError):
    """A compaction could not be made (its summary failed, nothing could be folded, or
    the result was no smaller); nothing of the history was folded or lost."""


class CompactionDeclined(CompactionError):
    """A compaction was summarised but not made: the request it leaves would not be
    smaller by the saving asked (``compact``'s ``min_saving_tokens``: what paying for
    the cache rewrite takes).  Not a failure: nothing is recorded or stored and a
    circuit breaker does not count it."""


class RenderError(CtxrulesError):
    """A commit or context could not be rendered into a request."""


class ProviderError(CtxrulesError):
    """A provider plugin is unknown or was given something it cannot send."""


class PromptTooLongError(ProviderError):
    """The provider refused a request because the prompt exceeds the model's window."""


class ResponseError(ProviderError):
    """A response is not an answer of the provider it was handed to: another vendor's
    body, a wrong role, content of the wrong type, usage that is not a finite count.
    ``field`` is the path of what is wrong (``"usage.input_tokens"``); nothing was
    recorded."""

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        where: str | None = None,
        hint: str | None = None,
    ):
        self.field = field
        super().__init__(message, where=where, hint=hint)


class StreamError(ResponseError):
    """A streamed response that did not finish (no final event), or one event of a
    stream handed over as if it were the whole answer; nothing was recorded."""


class VendorError(ProviderError):
    """The vendor answered with an error (its error body, or an error event of a
    stream), not with an answer.  ``status`` is the HTTP status when known, ``type`` /
    ``code`` the vendor's error type and code, ``body`` the error as received."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str = "",
        code: str = "",
        body: object = None,
        where: str | None = None,
        hint: str | None = None,
    ):
        self.status = status
        self.type = type
        self.code = code
        self.body = body
        super().__init__(message, where=where, hint=hint)


class CtxrulesWarning(UserWarning):
    """Base class of the warnings ctxrules gives on purpose: something deserves
    attention but does not stop the operation.  The CLI prints each on one line."""


class PluginWarning(CtxrulesWarning):
    """Something about the installed plugins deserves attention but does not stop loading
    (e.g. an allow-list entry that matches no installed plugin)."""


class TranscriptWarning(CtxrulesWarning):
    """Part of a transcript was left out of an import, which went on without it (e.g. a
    cut-off last line of a live session); the message names file:line."""


class AmbiguousIdError(CtxrulesError):
    """An id prefix that starts more than one session, node or commit id.

    ``candidates`` lists the matching ids (all of them, in the store's order).
    """

    def __init__(
        self,
        message: str,
        *,
        candidates: list[str],
        where: str | None = None,
        hint: str | None = None,
    ):
        self.candidates = candidates
        super().__init__(message, where=where, hint=hint)
