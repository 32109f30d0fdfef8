"""Reading YAML cassettes without aliases, with errors that name the line.

A YAML alias (``*name``) repeats the anchored node wherever it appears, so a few
hundred bytes of nested aliases stand for gigabytes once anything walks them (an
"alias bomb").  Recorded cassettes never use them, so the loader refuses the first
alias before constructing anything: the composed node graph is checked for a node
reached twice, which is exactly what an alias (or a merge key naming one) makes.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail

__all__ = ["load_yaml", "yaml_line"]


def _loader_class() -> Any:
    import yaml  # type: ignore[import-untyped]

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class NoAliasLoader(base):  # type: ignore[misc, valid-type]
        """The safe loader, refusing aliases and unreadable scalars with their line."""

        def get_single_data(self) -> Any:
            node = self.get_single_node()
            if node is None:
                return None
            _refuse_shared(node)  # before construction: nothing is expanded yet
            return self.construct_document(node)

        def construct_yaml_int(self, node: Any) -> Any:
            try:
                return super().construct_yaml_int(node)
            except ValueError as exc:  # e.g. more digits than Python converts
                raise yaml.constructor.ConstructorError(
                    None, None, f"unreadable integer: {exc}", node.start_mark
                ) from None

    NoAliasLoader.add_constructor("tag:yaml.org,2002:int", NoAliasLoader.construct_yaml_int)
    return NoAliasLoader


class _AliasFound(Exception):
    """The composed document reaches one node twice; ``line`` is near the alias."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


def _refuse_shared(root: Any) -> None:
    import yaml

    # Document order, so the first visit of a shared node is its anchor and the second
    # its alias; a node does not know where an alias to it stands, so the line reported
    # is that of the key (or the previous item) just before the alias.
    seen: set[int] = set()
    stack: list[tuple[Any, Any]] = [(root, root.start_mark)]
    while stack:
        node, mark = stack.pop()
        if id(node) in seen:
            raise _AliasFound(mark.line + 1)
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.append((value, key.start_mark))
                stack.append((key, key.start_mark))
        elif isinstance(node, yaml.SequenceNode):
            marks = [node.start_mark] + [item.end_mark for item in node.value[:-1]]
            stack.extend(zip(reversed(node.value), reversed(marks)))


_LOADER: Any = None


def _loader() -> Any:
    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    return _LOADER


def load_yaml(path: str, text: str) -> Any:
    """The YAML document of ``text``; aliases and syntax errors are ``ImportFormatError``s."""
    import yaml

    loader = _loader()(text)
    try:
        return loader.get_single_data()
    except _AliasFound as exc:
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


_PATH_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")


def yaml_line(path: str, at: str) -> int | None:
    """The line of the deepest element of ``at`` (``interactions[3].request``) found in a
    YAML file; only used on the error path.  ``None`` if the file cannot be composed."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            loader = _loader()(fh.read())
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    line = None
    for step in _PATH_STEP.finditer(at):
        key, index = step.group(1), step.group(2)
        if key is not None and isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif index is not None and isinstance(node, yaml.SequenceNode):
            node = node.value[int(index)] if int(index) < len(node.value) else None
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line + 1
    return line
