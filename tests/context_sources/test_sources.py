"""Context sources: the Protocol, and one registered through a real entry point is what
the registry hands back."""

from __future__ import annotations

import pytest

from ctxrules.context_sources import (
    ContextSource,
    SourceRequest,
    SourcesConfig,
    context_source_names,
    get_context_source,
)
from ctxrules.errors import PluginError

SOURCE = """
from pathlib import Path

from ctxrules.hookspecs import hookimpl


class Instructions:
    name = "fake-instructions"
    calls = []

    def collect(self, request):
        self.calls.append(request)
        found = [
            (Path(d) / "AGENTS.md").read_text()
            for d in (request.working_directory, *request.added_directories)
            if (Path(d) / "AGENTS.md").is_file()
        ]
        title = request.metadata.get("title", "")
        return "\\n".join([f"Session {request.session_id}: {title}", *found]) if found else None


class NoCollect:
    name = "fake-broken-source"


@hookimpl
def register_context_sources(register):
    register(Instructions())
    register(NoCollect())
"""


def test_a_source_registered_through_an_entry_point_is_returned(plugin_site, tmp_path):
    plugin_site.install("fake-sources", "fake_sources", SOURCE)
    assert context_source_names()[-2:] == ["fake-instructions", "fake-broken-source"]
    source = get_context_source("fake-instructions")
    assert isinstance(source, ContextSource)
    work, extra = tmp_path / "work", tmp_path / "extra"
    work.mkdir()
    extra.mkdir()
    (extra / "AGENTS.md").write_text("Run make test before committing.")
    request = SourceRequest(
        session_id="s_1",
        working_directory=str(work),
        added_directories=(str(extra),),
        metadata={"title": "fix the parser"},
        now=1767225600.0,
    )
    assert (
        source.collect(request) == "Session s_1: fix the parser\nRun make test before committing."
    )
    assert (
        source.collect(SourceRequest(session_id="s_2", working_directory=str(work), now=0.0))
        is None
    )
    assert type(source).calls[0] is request


def test_a_source_without_collect_is_refused_when_looked_up(plugin_site):
    plugin_site.install("fake-sources", "fake_sources", SOURCE)
    with pytest.raises(PluginError, match=r"fake-broken-source.*not a .*ContextSource"):
        get_context_source("fake-broken-source")
    with pytest.raises(PluginError, match="no context source named 'nope'"):
        get_context_source("nope")


def test_a_request_is_immutable_data():
    request = SourceRequest(session_id="s", working_directory="/w", now=0.0)
    assert request.added_directories == () and dict(request.metadata) == {}
    assert request.config == SourcesConfig()
    with pytest.raises(AttributeError):
        request.session_id = "t"  # type: ignore[misc]
