"""Probe: transcript text cannot drive the user's terminal.  A transcript carrying a
window-title sequence (OSC 0), clear-screen, an OSC 8 hyperlink, carriage returns and
backspaces, a C1 CSI, a bidirectional override, rich markup and an emoji code — in its
messages, its tool call's name and arguments and its file name — is imported, then
every human-readable command is run as a real process on a (forced) colour terminal.
Once rich's own colour sequences (SGR) are set aside, the output must hold no control
character but newline and tab, and the hostile text must show, escaped.

Before issue 25, ``sessions``, ``log``, ``import`` and the others printed the
sequences raw (and rich turned the markup into a live hyperlink)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HOSTILE = (
    "\x1b]0;pwned-title\x07 \x1b[2J\x1b[H \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ "
    "safe\rEVIL \x08\x08\x08X \x9b31m \u202eevil\u202c [link=https://evil.example]md[/link] "
    ":skull:"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours on a terminal
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "ctxrules", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("hostile")
    messages = [
        {"role": "system", "content": f"system {HOSTILE}"},
        {"role": "user", "content": f"user asks {HOSTILE}"},
        {
            "role": "assistant",
            "content": f"let me look {HOSTILE}",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "bash\x1b[2J",
                        "arguments": json.dumps({"cmd": f"ls {HOSTILE}"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": f"output {HOSTILE}"},
        {"role": "assistant", "content": f"done {HOSTILE}"},
        {"role": "user", "content": f"thanks {HOSTILE}"},
    ]
    path = root / "chat\x1b]0;file-title\x07.json"
    path.write_text(json.dumps(messages))
    proc = run("import", str(path), "--store", "store", cwd=root)
    assert proc.returncode == 0, proc.stderr
    proc = run("sessions", "--store", "store", "--json", cwd=root)
    session = json.loads(proc.stdout)[0]
    return root, session["id"], str(session["head"])


def check(proc: subprocess.CompletedProcess[str], what: str) -> str:
    for stream in (proc.stdout, proc.stderr):
        assert "Traceback" not in stream, stream[-2000:]
        bare = SGR.sub("", stream)
        found = sorted({hex(ord(c)) for c in CONTROL.findall(bare)})
        assert not found, f"{what}: raw control characters {found} in {bare[:800]!r}"
    return SGR.sub("", proc.stdout + proc.stderr)


COMMANDS = [
    ("sessions",),
    ("log", "{sid}"),
    ("commit", "{sid}"),
    ("stats", "{sid}"),
    ("render", "{sid}", "--provider", "anthropic", "--explain"),
    ("quality", "{sid}"),
    ("checkout", "{sid}", "{head}"),
    ("fork", "{sid}", "{head}"),
    ("compact", "{sid}"),
    ("log", "s_\x1b]0;typed\x07"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[f"{a[0]}-{i}" for i, a in enumerate(COMMANDS)])
def test_no_control_character_reaches_the_terminal(imported, argv):
    root, sid, head = imported
    args = [a.format(sid=sid, head=head) for a in argv]
    proc = run(*args, "--store", "store", cwd=root)
    shown = check(proc, " ".join(args[:2]))
    if args[0] in ("sessions", "log") and proc.returncode == 0:
        assert "\\x1b]0;" in shown  # the text is there, escaped


def test_the_import_line_names_the_file_escaped(tmp_path):
    path = tmp_path / "a\x1b[2Jb\r.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    proc = run("import", str(path), "--store", "s", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "a\\x1b[2Jb\\r.json" in check(proc, "import")
