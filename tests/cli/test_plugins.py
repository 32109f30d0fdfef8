"""``ctxrules plugins``: the readable listing is grouped by kind; ``--json`` is one row
per plugin and accounts for every registered name."""

from __future__ import annotations

import json

from ctxrules import plugins
from ctxrules.cli import main
from ctxrules.cli.plugins import KIND_ORDER

SOURCE_PLUGIN = """
from ctxrules.hookspecs import hookimpl


class Today:
    name = "fake-today"

    def collect(self, request):
        return None


@hookimpl
def register_context_sources(register):
    register(Today())
"""


def _sections(text: str) -> dict[str, list[str]]:
    """Heading (without its count) → the indented lines under it."""
    out: dict[str, list[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("    "):
            out[heading].append(line.strip())
        else:
            heading = line.rsplit(" (", 1)[0]
            out[heading] = []
    return out


def test_the_listing_groups_by_kind_and_names_each_plugin(plugin_site, capsys):
    plugin_site.install("fake-sources", "fake_sources", SOURCE_PLUGIN)
    assert main(["plugins"]) == 0
    text = capsys.readouterr().out
    sections = _sections(text)
    kinds = [k.replace("_", " ") for k in KIND_ORDER]
    assert list(sections) == [*kinds, "plugins"]
    assert set(KIND_ORDER) == set(plugins.KINDS)  # no kind left out of the order
    for kind in KIND_ORDER:
        reg = plugins.registry(kind)
        heading = kind.replace("_", " ")
        assert f"\n{heading} ({len(reg.names())})\n" in f"\n{text}"
        listed: dict[str, list[str]] = {}
        for line in sections[heading]:
            if line == "none":
                continue
            who, names = line.split(": ", 1)
            listed[who.removesuffix(" (built-in)")] = names.split(", ")
        expected: dict[str, list[str]] = {}
        for name in reg.names():
            expected.setdefault(reg.origin[name], []).append(name)
        assert listed == expected, kind
        assert (sections[heading] == ["none"]) == (not reg.names())
    assert sections["context sources"] == [
        "builtin_context_sources (built-in): instruction_files, git_status, date, cache_breaker",
        "fake-sources: fake-today",
    ]
    loaded = plugins.loaded_plugins()
    assert len(sections["plugins"]) == len(loaded)
    for p, line in zip(loaded, sections["plugins"]):
        assert line.startswith(p.name) and f"{p.distribution} {p.version}" in line
        assert ("(built-in)" in line) == p.builtin


def test_json_is_one_row_per_plugin_accounting_for_every_name(plugin_site, capsys):
    plugin_site.install("fake-sources", "fake_sources", SOURCE_PLUGIN)
    assert main(["plugins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [p.name for p in plugins.loaded_plugins()]
    fields = {"name", "distribution", "version", "builtin", "hooks", "provides"}
    assert all(set(r) == fields for r in rows)
    for kind in plugins.KINDS:
        reg = plugins.registry(kind)
        claimed = [(r["name"], n) for r in rows for n in r["provides"].get(kind, [])]
        assert sorted(claimed) == sorted((reg.origin[n], n) for n in reg.names()), kind
    row = next(r for r in rows if r["name"] == "fake-sources")
    assert row["provides"] == {"context_sources": ["fake-today"]} and not row["builtin"]
    assert row["hooks"] == ["register_context_sources"]
