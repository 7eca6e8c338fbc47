"""Reading a recipe file: YAML as safe_load reads it, but strict where a silent reading would mislead (a key
given twice, a self-containing alias, an alias bomb, nesting past any recipe's need), every refusal a
one-line RecipeError naming the file (and the line and column where YAML gives them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from calibrate.errors import RecipeError
from calibrate.files.untrusted import open_regular


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last silently)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Mark] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: construct_mapping merges it, own keys win
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"a mapping key must be a plain name, not a {type(key).__name__}", key_node.start_mark) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice in one mapping (first on line {seen[key].line + 1}); "
                "keep one of them", key_node.start_mark)
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_yaml(path: Path) -> Any:
    try:
        os.lstat(path)  # another OSError (a name too long) is the command line's to word
    except FileNotFoundError:
        raise RecipeError(f"recipe file {str(path)!r} does not exist") from None
    try:
        with open_regular(Path(path), "the recipe", "give a recipe YAML file", error=RecipeError) as fh:
            text = fh.read().decode("utf-8")
    except FileNotFoundError:
        raise RecipeError(f"recipe file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"cannot read recipe file {str(path)!r}: {exc}") from None
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise RecipeError(f"{path}: the YAML is nested too deeply to read; a recipe needs a few levels") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits, which int() refuses to read
        raise RecipeError(f"{path}: a value cannot be read ({str(exc)[:120]}); check the numbers in the recipe") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        loc = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        if "appears twice" in str(problem):
            raise RecipeError(f"{loc}: {problem}") from None
        raise RecipeError(f"{loc}: YAML syntax error: {problem}; fix the indentation or quoting on that line") from None
    _check_size(doc, path)
    return doc


#: a recipe is small: deeper nesting, or more values once YAML aliases are expanded, is a mistake
MAX_DEPTH, MAX_VALUES = 32, 100_000


def _check_size(doc: Any, path: Path) -> None:
    """Refuse self-containing aliases (`&a [*a]`) and alias bombs before anything walks or prints them."""
    sizes: dict[int, int] = {}  # expanded size per container, so that shared (aliased) parts are counted once

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        if depth > MAX_DEPTH:
            raise RecipeError(f"{path}: values nested more than {MAX_DEPTH} levels deep, or a YAML alias inside the "
                              "value it names (`&a [*a]`); write the value out")
        if id(node) not in sizes:
            items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            sizes[id(node)] = 1 + sum(size(v, depth + 1) for v in items)
        return sizes[id(node)]

    if size(doc, 0) > MAX_VALUES:
        raise RecipeError(f"{path}: the YAML aliases expand to more than {MAX_VALUES:,} values; a recipe needs a few "
                          "dozen: write the values out instead of nesting aliases")
