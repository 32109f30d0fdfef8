"""The YAML loader of cassettes, which refuses aliases, and where an element stands in a
YAML file (for error messages).

Beyond the safe loader's tags it reads the two a real cassette carries: Ruby's
``!binary`` (a base64 body, as bytes) and aiohttp's header names, which vcrpy pickles
as ``!!python/object/apply:multidict._multidict.istr ["Accept"]`` (read as the string;
no Python object is ever made, and any other Python tag is refused).

A YAML alias (``*name``) repeats the anchored node wherever it appears, so a few
hundred bytes of nested aliases stand for gigabytes once anything walks them (an
"alias bomb").  Recorded cassettes never use them, so the loader refuses the first
alias before constructing anything: the composed node graph is checked for a node
reached twice, which is exactly what an alias (or a merge key naming one) makes.

PyYAML is imported only when a YAML file is read (it costs tens of milliseconds).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["AliasFound", "yaml_line", "yaml_loader"]


def _loader_class() -> Any:
    # deferred: PyYAML costs ~20 ms to import, paid only when a YAML file is read
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

    def construct_ruby_binary(self: Any, node: Any) -> bytes:
        # Ruby's Psych writes a binary string as ``!binary`` (base64), the standard
        # ``!!binary`` under a local tag.
        return bytes(self.construct_yaml_binary(node))

    def construct_istr(self: Any, suffix: str, node: Any) -> str:
        # aiohttp header names as vcrpy saves them (dd-trace-py's cassettes): a
        # case-insensitive str subclass, pickled as the call ``istr("Accept")``.
        # Nothing is called: the argument is read as the plain string it is.
        if (
            suffix in _ISTR
            and isinstance(node, yaml.SequenceNode)
            and len(node.value) == 1
            and isinstance(node.value[0], yaml.ScalarNode)
        ):
            return str(self.construct_scalar(node.value[0]))
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"a Python object tag (!!python/object/apply:{suffix}): cassettes are read as "
            "data, and only aiohttp's header-name strings (multidict istr) are taken",
            node.start_mark,
        )

    NoAliasLoader.add_constructor("tag:yaml.org,2002:int", NoAliasLoader.construct_yaml_int)
    NoAliasLoader.add_constructor("!binary", construct_ruby_binary)
    NoAliasLoader.add_multi_constructor("tag:yaml.org,2002:python/object/apply:", construct_istr)
    return NoAliasLoader


#: The constructors of aiohttp's header-name strings a cassette may name.
_ISTR = frozenset({"multidict._multidict.istr", "multidict._multidict_py.istr", "multidict.istr"})


class AliasFound(Exception):
    """The composed document reaches one node twice; ``line`` is near the alias."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


def _refuse_shared(root: Any) -> None:
    # deferred: PyYAML costs ~20 ms to import, paid only when a YAML file is read
    import yaml

    # Document order, so the first visit of a shared node is its anchor and the second
    # its alias; a node does not know where an alias to it stands, so the line reported
    # is that of the key (or the previous item) just before the alias.
    seen: set[int] = set()
    stack: list[tuple[Any, Any]] = [(root, root.start_mark)]
    while stack:
        node, mark = stack.pop()
        if id(node) in seen:
            raise AliasFound(mark.line + 1)
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.append((value, key.start_mark))
                stack.append((key, key.start_mark))
        elif isinstance(node, yaml.SequenceNode):
            marks = [node.start_mark] + [item.end_mark for item in node.value[:-1]]
            stack.extend(zip(reversed(node.value), reversed(marks)))


_LOADER: Any = None


def yaml_loader() -> Any:
    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    return _LOADER


_PATH_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")


def yaml_line(text: str, at: str) -> int | None:
    """The line of the deepest element of ``at`` (``interactions[3].request``) found in a
    YAML file's text; only used on the error path.  ``None`` if it cannot be composed."""
    # deferred: PyYAML costs ~20 ms to import, paid only when a YAML file is read
    import yaml

    try:
        loader = yaml_loader()(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except (yaml.YAMLError, RecursionError):
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
