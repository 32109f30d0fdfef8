"""Collecting the context sources: the fixed order, the date from the injected clock,
the cache-breaker switch, the configuration and its errors, plugin sources, and the
per-session memo (a changed file is not seen until ``refresh``, and is seen after)."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ctxrules.context_sources import (
    BUILTIN_SOURCES,
    SourceMemo,
    SourceRequest,
    SourcesConfig,
    collect_sources,
    context_source_names,
    get_context_source,
    source_order,
)
from ctxrules.context_sources.date import today
from ctxrules.errors import ConfigError, PluginError, ValidationError

NEW_YEAR = 1767225600.0  # 2026-01-01T00:00:00Z
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def request(cwd: Path, *, session: str = "s_1", now: float = NEW_YEAR, **config) -> SourceRequest:
    return SourceRequest(
        session_id=session,
        working_directory=str(cwd),
        now=now,
        config=SourcesConfig(**config),
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    # A repository: the git status has something to say, the instruction-file search
    # stops here.
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True, capture_output=True)
    (ws / "AGENTS.md").write_text("Run the tests before every commit.")
    return ws


# -- the date ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "zone", "day"),
    [
        (NEW_YEAR, "UTC", "2026-01-01"),
        (NEW_YEAR - 1, "UTC", "2025-12-31"),
        (NEW_YEAR, "America/New_York", "2025-12-31"),  # 19:00 on the 31st, UTC-5
        (NEW_YEAR - 3600, "Asia/Tokyo", "2026-01-01"),  # 08:00 on the 1st, UTC+9
        (978307200.0, "UTC", "2001-01-01"),
    ],
)
def test_the_date_is_the_request_clock_in_the_configured_zone(tmp_path, now, zone, day):
    text = get_context_source("date").collect(request(tmp_path, now=now, timezone=zone))
    assert text == f"Today's date is {day}."


def test_the_date_never_reads_the_system_clock(tmp_path, monkeypatch):
    def no_clock() -> float:
        raise AssertionError("the system clock was read")

    monkeypatch.setattr(time, "time", no_clock)
    assert today(NEW_YEAR + 86400 * 40, "UTC") == "2026-02-10"
    texts = collect_sources(request(tmp_path, timezone="UTC", git_status=False)).texts
    assert [t.text for t in texts] == ["Today's date is 2026-01-01."]


def test_local_means_the_process_zone(tmp_path, monkeypatch):
    if not hasattr(time, "tzset"):
        pytest.skip("no tzset on this platform")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert today(NEW_YEAR, "local") == "2025-12-31"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_date_can_be_switched_off(tmp_path):
    assert get_context_source("date").collect(request(tmp_path, date=False)) is None


# -- order, switches, the cache breaker -----------------------------------------


def test_every_builtin_is_registered_and_collected_in_the_fixed_order(workspace):
    assert context_source_names()[: len(BUILTIN_SOURCES)] == list(BUILTIN_SOURCES)
    got = collect_sources(request(workspace, timezone="UTC", cache_breaker="dbg-7"))
    assert [t.name for t in got.texts] == list(BUILTIN_SOURCES)
    assert "Current branch: main" in got.texts[1].text
    assert got.texts[-1].text == "[CACHE_BREAKER: dbg-7]"
    assert got.session_id == "s_1" and got.now == NEW_YEAR
    assert got.text == "\n\n".join(t.text for t in got.texts)


def test_the_cache_breaker_is_off_by_default(workspace):
    assert SourcesConfig().cache_breaker == ""
    got = collect_sources(request(workspace))
    assert "cache_breaker" not in [t.name for t in got.texts]
    assert "CACHE_BREAKER" not in got.text


def test_switches_turn_sources_off(workspace):
    got = collect_sources(request(workspace, instruction_files=False, date=False, git_status=False))
    assert got.texts == ()


# -- configuration -----------------------------------------------------------------


def test_a_toml_table_becomes_the_config():
    cfg = SourcesConfig.from_mapping(
        {
            "git_status": False,
            "instruction_file_names": ["AGENTS.md", "TEAM.md"],
            "timezone": "Europe/Berlin",
            "git_timeout_seconds": 2,
        },
        source="ctxrules.toml",
    )
    assert cfg.git_status is False and cfg.instruction_file_names == ("AGENTS.md", "TEAM.md")
    assert cfg.timezone == "Europe/Berlin" and cfg.git_timeout_seconds == 2.0
    assert cfg.date is True and cfg.git_max_chars == 2000  # the rest keeps its defaults


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"git_status": "no"}, "git_status"),
        ({"git_max_chars": 50}, "git_max_chars"),
        ({"git_timeout_seconds": math.nan}, "git_timeout_seconds"),
        ({"git_timeout_seconds": 0}, "git_timeout_seconds"),
        ({"instruction_file_names": ["docs/AGENTS.md"]}, "instruction_file_names"),
        ({"instruction_file_names": ["A.md", "A.md"]}, "instruction_file_names"),
        ({"instruction_file_names": [""]}, "instruction_file_names"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"cache_breaker": "two\nlines"}, "cache_breaker"),
        ({"extra_sources": ["date"]}, "extra_sources"),
        ({"source_options": {"mine": {"a": 1}}}, "source_options.mine"),
        ({"git_stauts": False}, "git_stauts"),
    ],
)
def test_bad_values_are_config_errors_naming_the_key(table, key):
    with pytest.raises(ConfigError) as exc:
        SourcesConfig.from_mapping(table, source="ctxrules.toml")
    assert exc.value.where == f"ctxrules.toml: context_sources.{key}"


def test_bad_values_from_python_are_config_errors_too():
    with pytest.raises(ConfigError, match="git_status"):
        SourcesConfig(git_status="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="instruction_file_names"):
        SourcesConfig(instruction_file_names=["AGENTS.md"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="git_log_count"):
        SourcesConfig(git_log_count=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("now", [math.nan, math.inf, None, True, 1e300])
def test_a_request_needs_a_real_clock(tmp_path, now):
    with pytest.raises(ValidationError, match="now"):
        SourceRequest(session_id="s", working_directory=str(tmp_path), now=now)  # type: ignore[arg-type]


def test_a_request_needs_absolute_directories(tmp_path):
    with pytest.raises(ValidationError, match="working_directory"):
        SourceRequest(session_id="s", working_directory="relative/dir", now=0.0)
    with pytest.raises(ValidationError, match="added_directories"):
        SourceRequest(
            session_id="s", working_directory=str(tmp_path), now=0.0, added_directories=("x",)
        )


# -- plugin sources ------------------------------------------------------------------

PLUGIN = """
from ctxrules.hookspecs import hookimpl


class Ticket:
    name = "fake-ticket"

    def collect(self, request):
        options = request.config.source_options.get(self.name, {})
        return f"Ticket {options.get('id', '?')} for {request.metadata.get('title', '')}"


class Broken:
    name = "fake-broken"

    def collect(self, request):
        raise RuntimeError("disk on fire")


class Numbers:
    name = "fake-number"

    def collect(self, request):
        return 42


@hookimpl
def register_context_sources(register):
    register(Ticket())
    register(Broken())
    register(Numbers())
"""


def test_extra_sources_come_after_the_date_with_their_options(plugin_site, workspace):
    plugin_site.install("fake-ticket", "fake_ticket", PLUGIN)
    req = SourceRequest(
        session_id="s_1",
        working_directory=str(workspace),
        now=NEW_YEAR,
        metadata={"title": "fix login"},
        config=SourcesConfig(
            extra_sources=("fake-ticket",),
            source_options={"fake-ticket": {"id": "T-123"}},
            cache_breaker="x",
            timezone="UTC",
        ),
    )
    assert source_order(req) == (
        "instruction_files",
        "git_status",
        "date",
        "fake-ticket",
        "cache_breaker",
    )
    got = collect_sources(req)
    assert [t.name for t in got.texts] == list(source_order(req))
    assert got.texts[3].text == "Ticket T-123 for fix login"


def test_a_failing_or_unknown_source_is_a_plugin_error_naming_it(plugin_site, workspace):
    plugin_site.install("fake-ticket", "fake_ticket", PLUGIN)
    for name, message in (
        ("fake-broken", "context source 'fake-broken' failed: RuntimeError: disk on fire"),
        ("fake-number", "context source 'fake-number' answered a int, not text"),
        ("fake-missing", "no context source named 'fake-missing'"),
    ):
        with pytest.raises(PluginError, match=message):
            collect_sources(request(workspace, extra_sources=(name,)))


# -- the memo -------------------------------------------------------------------------


def test_the_memo_keeps_a_session_s_sources_until_refresh(workspace):
    memo = SourceMemo()
    req = request(workspace, git_status=False, timezone="UTC")
    first = memo.get(req)
    assert "Run the tests before every commit." in first.text
    assert "s_1" in memo

    (workspace / "AGENTS.md").write_text("Never push on Fridays.")
    (workspace / "CLAUDE.md").write_text("Use tabs.")
    a_day_later = request(workspace, now=NEW_YEAR + 86400, git_status=False, timezone="UTC")
    again = memo.get(a_day_later)
    assert again is first  # the same collection: no file was read again
    assert "Never push on Fridays." not in again.text and "2026-01-01" in again.text

    # Another session collects for itself and sees the disk as it is now.
    other = memo.get(request(workspace, session="s_2", git_status=False, timezone="UTC"))
    assert "Never push on Fridays." in other.text and "Use tabs." in other.text
    assert memo.get(req) is first  # and s_1 still has its own

    memo.refresh("s_1")  # after a compaction
    assert "s_1" not in memo
    fresh = memo.get(a_day_later)
    assert "Never push on Fridays." in fresh.text and "Use tabs." in fresh.text
    assert "Run the tests before every commit." not in fresh.text
    assert "Today's date is 2026-01-02." in fresh.text
    assert memo.get(req) is fresh  # memoised again until the next refresh

    memo.refresh("s_unknown")  # forgetting a session never seen is not an error
