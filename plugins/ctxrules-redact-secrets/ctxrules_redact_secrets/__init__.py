"""Secrets redaction for ctxrules: a rule registered through the ``register_rules`` hook.

Matches are replaced by ``[redacted:<kind>]`` in the rendered text and the tool input of
new items (every item once, when the rule set changed).  The item keeps its state
(``full``); the DAG node is never touched.  Run it first so every later rule — aging
stubs, summaries — works on clean text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ctxrules.hookspecs import RegisterRules, hookimpl
from ctxrules.ruleapi import Rule, RuleContext

__all__ = ["PATTERNS", "RedactSecrets", "redact"]

# Ordered: specific vendor formats before the generic ones that would also match them.
PATTERNS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(
        r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z]+ )*PRIVATE KEY-----",
        re.DOTALL,
    ),
    "anthropic_api_key": re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    "openai_api_key": re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github_token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    "google_api_key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
    "slack_token": re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    "bearer_token": re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9\-._~+/]{16,}=*"),
    "credential": re.compile(
        # quotes may be JSON-escaped (tool arguments are JSON text)
        r"(?i)\b(?:api[_-]?key|secret|token|passw(?:or)?d)(?:\\?[\"'])?\s*[:=]\s*"
        r"(?:\\?[\"'])?(?!\[redacted:)(?P<value>[^\s\\\"',;]{8,})"
    ),
}


def redact(text: str, kinds: frozenset[str] | None = None) -> tuple[str, list[str]]:
    """``text`` with every secret replaced, and the kinds found (in order, repeated)."""
    found: list[str] = []
    for kind, pattern in PATTERNS.items():
        if kinds is not None and kind not in kinds:
            continue

        def sub(m: re.Match[str], kind: str = kind) -> str:
            found.append(kind)
            if m.groupdict().get("value"):
                start = m.start("value") - m.start()
                return m.group(0)[:start] + f"[redacted:{kind}]"
            return f"[redacted:{kind}]"

        text = pattern.sub(sub, text)
    return text, found


class RedactSecrets(Rule):
    """Replace API keys, bearer tokens and private keys by ``[redacted:<kind>]``."""

    name = "redact_secrets"
    params: ClassVar[Mapping[str, Any]] = {"kinds": tuple(PATTERNS), "roles": ("tool",)}

    def check(self) -> None:
        unknown = set(self.kinds) - set(PATTERNS)
        if unknown:
            raise self.bad("kinds", f"names unknown kinds {sorted(unknown)}")
        self._kinds = frozenset(self.kinds)

    def apply(self, ctx: RuleContext) -> None:
        counts: dict[str, int] = {}
        for pos in ctx.scan_positions():
            it = ctx.items[pos]
            if it.role not in self.roles or it.locked or it.state in ("summarized",):
                continue
            rendered, a = redact(it.rendered, self._kinds)
            tool_input, b = redact(it.tool_input, self._kinds)
            if a or b:
                ctx.replace(
                    pos,
                    rendered=rendered,
                    tool_input=tool_input,
                    reason="redacted:" + ",".join(sorted(set(a + b))),
                )
                for kind in a + b:
                    counts[kind] = counts.get(kind, 0) + 1
        if counts:
            ctx.note("redacted " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


@hookimpl
def register_rules(register: RegisterRules) -> None:
    register(RedactSecrets)
