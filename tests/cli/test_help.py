"""Every subcommand's ``--help`` has a description and examples, and every example
parses; usage errors are one line."""

from __future__ import annotations

import argparse
import shlex

import pytest

from ctxrules.cli import COMMANDS, build_parser, main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


SUBCOMMANDS = sorted(_subparsers())


def test_every_command_module_adds_a_subcommand():
    assert len(SUBCOMMANDS) == len(COMMANDS)
    assert {c.rstrip("_") for c in COMMANDS} == set(SUBCOMMANDS)


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:\n"), parser.prog
    return [line.strip() for line in epilog.splitlines()[1:] if line.strip()]


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_help_has_a_description_and_examples(name, capsys):
    parser = _subparsers()[name]
    assert parser.description and len(parser.description.split()) >= 8, name
    examples = _examples(parser)
    assert examples, name
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    shown = capsys.readouterr().out
    assert " ".join(parser.description.split()[:6]) in " ".join(shown.split())
    assert "examples:" in shown
    for line in examples:
        assert line in shown  # verbatim: the lines keep their layout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_example_parses(name):
    """Each example is a command line this parser accepts (after an optional pipe or
    environment assignment), for that very subcommand."""
    for line in _examples(_subparsers()[name]):
        words = shlex.split(line, comments=True)
        start = words.index("ctxrules")
        argv = words[start + 1 :]
        assert argv[0] == name, line
        args = build_parser().parse_args(argv)
        assert args.command == name and callable(args.func), line


def test_a_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["render", "s_x"])  # --provider is required
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--provider" in err and "ctxrules render --help" in err
    with pytest.raises(SystemExit):
        main(["no-such-command"])
    assert capsys.readouterr().err.count("\n") == 1
