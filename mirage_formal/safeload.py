"""Parsing JSON and TOML data files with limits, so a hostile or broken file is a
:class:`FormatError`, never a Python crash.

Python's own parsers recurse once per nesting level: a file nested 100,000 deep ends in
``RecursionError``, and a number like ``1e400`` becomes ``inf``. Every loader of the package
(μGraph files in our JSON and Mirage's, checkpoints, axiom and preset TOML) parses through
:func:`parse_json` / :func:`parse_toml`, which first measure the nesting depth without
recursion and refuse anything deeper than :data:`MAX_DEPTH`, and refuse non-finite numbers.
Nothing in a file is executed.

Imports only the package's errors.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from typing import Any

from mirage_formal.errors import FormatError

MAX_DEPTH = 64
"""Deepest nesting of arrays/objects (tables) accepted. Our μGraph JSON nests about 8 deep,
Mirage's about 7, checkpoints about 10; 64 leaves room for user metadata."""

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_TOML_STRING = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*',
                          re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def nesting_depth(text: str, strings: re.Pattern[str] = _JSON_STRING) -> int:
    """The deepest bracket nesting of ``text`` outside string literals (no recursion)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(strings.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise FormatError(f"the number {name} is not allowed; write a finite number")


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise FormatError(f"the number {s} is too large for a 64-bit float; write a finite number")
    return v


def parse_json(text: str, where: str) -> Any:
    """Parse JSON ``text`` (from ``where``, used in messages) within the limits above."""
    d = nesting_depth(text)
    if d > MAX_DEPTH:
        raise FormatError(f"{where}: JSON nested {d} levels deep; at most {MAX_DEPTH} are "
                          "accepted (is this the right file?)")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise FormatError(f"{where}: not valid JSON: {e}") from None
    except ValueError:  # an integer of more than 4300 digits
        raise FormatError(f"{where}: a number has too many digits (over 4300)") from None
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH is far below the interpreter's limit
        raise FormatError(f"{where}: JSON nested too deeply") from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """Parse TOML ``text`` (from ``where``) within the limits above; inf and nan are refused."""
    d = nesting_depth(text, _TOML_STRING)
    if d > MAX_DEPTH:
        raise FormatError(f"{where}: TOML nested {d} levels deep; at most {MAX_DEPTH} are accepted")
    try:
        return tomllib.loads(text, parse_float=_finite_float)
    except tomllib.TOMLDecodeError as e:
        raise FormatError(f"{where}: not valid TOML: {e}") from None
    except ValueError:  # an integer of more than 4300 digits
        raise FormatError(f"{where}: a number has too many digits (over 4300)") from None
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    except RecursionError:  # pragma: no cover - see parse_json
        raise FormatError(f"{where}: TOML nested too deeply") from None
