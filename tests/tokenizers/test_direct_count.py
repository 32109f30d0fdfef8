"""The public ``count`` / ``count_batch`` (and ``ctxrules count``) reach the core for its
encodings without a plugin-registry lookup per call, and count what the registered
tokenizer counts; other names still go through the registry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ctxrules.plugins as plugins
from ctxrules.cli import main
from ctxrules.errors import PluginError
from ctxrules.tokenizers import ENCODINGS, count, count_batch, get_tokenizer

TEXTS = ["Hello, world! 日本語 🙂", "def f(x):\n    return x * 2\n", "", "lone \ud800 surrogate"]


#: Each core encoding's counts of ``TEXTS`` by its registered tokenizer.
EXPECTED = {e: [get_tokenizer(e).count(t) for t in TEXTS] for e in ENCODINGS}


@pytest.fixture
def no_registry(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The plugin registry (the tokenizers module imports it when it looks a name up),
    replaced by one that records each lookup and refuses it: the kinds asked for."""
    asked: list[str] = []

    def refuse(kind: str) -> object:
        asked.append(kind)
        raise AssertionError(f"registry looked up for {kind}")

    monkeypatch.setattr(plugins, "registry", refuse)
    return asked


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_count_of_a_core_encoding_makes_no_registry_lookup(
    no_registry: list[str], encoding: str
) -> None:
    expected = EXPECTED[encoding]
    assert [count(t, encoding) for t in TEXTS] == expected
    assert count_batch(TEXTS, encoding) == expected
    assert count_batch(tuple(TEXTS), encoding) == expected
    assert no_registry == []


def test_another_name_goes_through_the_registry(no_registry: list[str]) -> None:
    with pytest.raises(AssertionError):
        count("x", "tiktoken:o200k_base")
    assert no_registry == ["tokenizers"]


def test_an_unknown_name_is_still_a_plugin_error() -> None:
    with pytest.raises(PluginError, match="no tokenizer named"):
        count("x", "no-such-encoding")


def test_the_cli_counts_through_the_direct_path(
    no_registry: list[str], tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "a.txt"
    f.write_text(TEXTS[1], encoding="utf-8")
    assert main(["count", "--json", "--encoding", "cl100k_base", str(f)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tokens"] == EXPECTED["cl100k_base"][1]
    assert no_registry == []


def test_counting_a_file_loads_no_plugin_layer(tmp_path) -> None:
    """``ctxrules count`` as a process imports neither pluggy nor ``ctxrules.plugins``
    (entry points, importlib.metadata: tens of ms of start-up; issue 18)."""
    f = tmp_path / "a.txt"
    f.write_text(TEXTS[1], encoding="utf-8")
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['ctxrules', 'count', {str(f)!r}]\n"
        "try:\n    runpy.run_module('ctxrules', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('MODULES', sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    counted, modules = out.stdout.split("MODULES", 1)
    assert int(counted) == EXPECTED["o200k_base"][1]
    loaded = set(eval(modules))
    assert not {"pluggy", "ctxrules.plugins", "importlib.metadata"} & loaded
