"""Fixtures of the rerender tests: a subset of the corpus (its first files, every format
the first importers read; 8 of the 200 tau-bench trajectories, cut from the corpus file
at test time) and one reference run
of it, in this process, that the other runs are compared with byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.corpus import FIRST

from ctxrules.batch import ReplayOptions, rerender
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.store import open_store

#: The configuration the tests replay under: every rule fires on the corpus.
OPTIONS = ReplayOptions.of(PipelineConfig.preset("aggressive"))
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"
TAU_KEPT = 8


@pytest.fixture(scope="session")
def subset(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of transcripts: the corpus's first files without most tau-bench runs
    (19 sessions)."""
    root = tmp_path_factory.mktemp("subset")
    for rel in FIRST:
        if rel == TAU:
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / rel, root / rel)
    runs = json.loads((corpus / TAU).read_text())
    (root / TAU).parent.mkdir(parents=True, exist_ok=True)
    (root / TAU).write_text(json.dumps(runs[:TAU_KEPT]))
    return root


@pytest.fixture(scope="session")
def reference(subset: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The results file of one uninterrupted run over ``subset`` in this process."""
    out = tmp_path_factory.mktemp("reference") / "out.jsonl"
    result = rerender([str(subset)], OPTIONS, jobs=1, out=out)
    assert not result.interrupted and result.replayed == result.sessions == 19
    return out.read_bytes()


def filled_store(location: str, subset: Path) -> str:
    """The store at ``location`` (a path or a PostgreSQL URL), filled with what
    ``subset``'s transcripts import to."""
    store = open_store(location)
    try:
        import_paths(store, [str(subset)])
    finally:
        store.close()
    return location
