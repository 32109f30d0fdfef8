"""Fixtures shared by tests/ and benches/: the corpus of real sessions and a clean plugin state.

Benchmarks run once as correctness checks under ``make test`` (``--benchmark-disable``
is in addopts) and for real under ``make bench``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
#: Copies of the recorded sessions the tests and benchmarks read (sources: its SOURCES.md).
CORPUS = REPO / "tests" / "data" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real recorded sessions in tests/data/corpus (never edited)."""
    return CORPUS


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch):
    """Reset the plugin manager before and after a test that changes what loads."""
    from ctxrules import plugins

    plugins.reset()
    yield monkeypatch
    plugins.reset()


class PluginSite:
    """A temporary directory that plugin discovery treats as installed (site-packages)."""

    def __init__(self, path: Path):
        self.path = path

    def install(self, dist: str, module: str, body: str, ep_name: str | None = None) -> None:
        """Write distribution ``dist`` (dist-info with one ``ctxrules`` entry point named
        ``ep_name``, default ``dist``) and its module ``module`` with source ``body``."""
        info = self.path / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[ctxrules]\n{ep_name or dist} = {module}\n")
        (self.path / f"{module}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def plugin_site(tmp_path: Path, fresh_plugins: pytest.MonkeyPatch):
    """A fresh plugin state plus a directory whose distributions count as installed.

    Discovery reads only the interpreter's site-packages (``plugins.installed_paths``);
    the fixture adds its directory to that list and to ``sys.path``, every third-party
    plugin allowed.  Modules written there start with ``fake_`` and are unloaded after.
    """
    from ctxrules import plugins

    real = plugins.installed_paths
    fresh_plugins.setattr(plugins, "installed_paths", lambda: [str(tmp_path), *real()])
    fresh_plugins.syspath_prepend(str(tmp_path))
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    yield PluginSite(tmp_path)
    for mod in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[mod]
