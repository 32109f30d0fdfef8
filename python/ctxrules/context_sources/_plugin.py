"""Built-in context sources, registered through the ``ctxrules`` entry points like any plugin."""

from __future__ import annotations

from ..hookspecs import RegisterContextSources, hookimpl
from .cache_breaker import CacheBreakerSource
from .date import DateSource
from .git_status import GitStatusSource
from .instruction_files import InstructionFilesSource


@hookimpl
def register_context_sources(register: RegisterContextSources) -> None:
    # Registration order is the collection order (``BUILTIN_SOURCES``).
    register(InstructionFilesSource())
    register(GitStatusSource())
    register(DateSource())
    register(CacheBreakerSource())
