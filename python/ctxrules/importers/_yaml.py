"""Reading YAML cassettes with the alias-refusing loader (``_yaml_loader``), with errors
that name the line."""

from __future__ import annotations

from typing import Any

from ._common import fail
from ._yaml_loader import AliasFound, yaml_loader

__all__ = ["load_yaml"]


def load_yaml(path: str, text: str) -> Any:
    """The YAML document of ``text``; aliases and syntax errors are ``ImportFormatError``s."""
    # deferred: PyYAML costs ~20 ms to import, paid only when a YAML file is read
    import yaml  # type: ignore[import-untyped]

    loader = yaml_loader()(text)
    try:
        return loader.get_single_data()
    except AliasFound as exc:
        raise fail(
            path,
            exc.line,
            "the cassette uses a YAML alias (*name): refused, since aliases can expand a "
            "few hundred bytes into gigabytes and recorded cassettes never need them",
            "write the repeated value out in full, or re-record the cassette",
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise fail(path, line, f"bad YAML: {exc.problem}", "fix the cassette") from None
    except yaml.YAMLError as exc:
        raise fail(path, None, f"bad YAML: {exc}", "fix the cassette") from None
    except RecursionError:
        raise fail(
            path, None, "YAML nested too deeply to read", "flatten the cassette's values"
        ) from None
    finally:
        loader.dispose()
