"""The subcommands of the ``ctxrules`` command line, in the order ``--help`` lists them,
each with its one-line summary: the one place both are written, so ``ctxrules --help``
lists every command without importing any of them."""

from __future__ import annotations

__all__ = ["COMMANDS", "module_of"]

#: Command name → its one-line summary (shown by ``ctxrules --help``).
COMMANDS: dict[str, str] = {
    "demo": "run the pipeline on a bundled real session",
    "count": "count tokens of files (stdin when none)",
    "plugins": "list loaded plugins, by kind",
    "import": "import transcripts (Claude Code, OpenAI / Anthropic messages, SWE-agent, …)",
    "sessions": "list the sessions in the store",
    "log": "show a session's history graph",
    "commit": "show the context commit at a head",
    "compact": "compact a session: fold its history into a summary",
    "checkout": "move a session's HEAD to a node or sibling (never reruns anything)",
    "fork": "start a new session at a node (history shared, not copied)",
    "attach": "stage another session's context for a session's next request",
    "merge": "merge other sessions' heads into a session with one model turn",
    "render": "render a session's commit into a provider request",
    "stats": "show how full a session's context window is, by category",
    "quality": "check which key facts a compacted request keeps",
    "rerender": "replay recorded sessions under a rule set and report what it changes",
    "tune": "choose rule parameters by replaying recorded sessions",
    "calibrate": "fit per-model token-estimate constants on recorded calls with usage",
    "view": "browse a session in a local web page (or export one HTML file)",
    "store": "work on whole stores: copy sessions and commits between them",
    "proxy": "record agents' live API calls into the store, or shape them by the rules",
}


def module_of(command: str) -> str:
    """The module of ``ctxrules.cli`` that implements ``command`` (``import`` is a keyword)."""
    return "import_" if command == "import" else command
