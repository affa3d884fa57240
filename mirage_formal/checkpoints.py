"""Checking a search checkpoint before the search resumes from it.

The search driver writes ``checkpoint.json`` atomically (format ``mirage-formal.search-
checkpoint``: the program/config key, the finished work units, elapsed seconds, statistics,
and the accepted μGraphs in our JSON with their cost and verdict). A file that was edited or
damaged but is still valid JSON could otherwise resume into a wrong answer — an emptied
``accepted`` list reads as "nothing found" although the statistics count acceptances.
:func:`check_checkpoint` validates every field the driver reads, and that the accepted list
agrees with the statistics; any problem is a :class:`MirageError` that says to delete the file
or run with ``--fresh``. Nothing is executed.

Imports ``ir.serialize``, ``safeload`` and the errors.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mirage_formal.errors import MirageError
from mirage_formal.ir.serialize import ugraphs_from_json
from mirage_formal.safeload import parse_json

FORMAT = "mirage-formal.search-checkpoint"
_COST = ("us", "launches", "dram_bytes", "l2_bytes", "flops")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _unit(v: Any) -> bool:
    """A work-unit number, or -1: the seed candidates checked before the units."""
    return _int(v) or v == -1


def check_checkpoint(path: Path) -> None:
    """Refuse a checkpoint the driver could misread (see the module doc); an absent file is fine."""
    if not path.is_file():
        return
    fix = "; delete it or run with --fresh to search again"

    def bad(why: str) -> MirageError:
        return MirageError(f"checkpoint {path}: {why}{fix}")

    try:
        raw = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise bad(f"cannot read: {e}") from None
    try:
        doc = parse_json(raw, "")
    except MirageError as e:
        raise bad(str(e).lstrip(": ")) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad("not a search checkpoint")
    if type(doc.get("version")) is not int or doc.get("version") != 1 \
            or not isinstance(doc.get("key"), str):  # (JSON's true equals 1 in Python)
        raise bad("unknown version or missing key")
    done = doc.get("done")
    if not isinstance(done, list) or not all(_int(u) for u in done):
        raise bad("'done' must be a list of work-unit numbers")
    if "elapsed_s" in doc and not _num(doc["elapsed_s"]):
        raise bad("'elapsed_s' must be a non-negative number")
    stats = doc.get("stats")
    if not isinstance(stats, dict):
        raise bad("lacks its statistics")
    for k, v in stats.items():
        if isinstance(v, dict):
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in v.values()):
                raise bad(f"statistic {k!r} must map names to integers")
        elif not _int(v):
            raise bad(f"statistic {k!r} must be a non-negative integer")
    events = stats.get("accepted")
    if not isinstance(events, int) or not _int(events):
        raise bad("its statistics lack the count of accepted μGraphs")
    try:
        records = ugraphs_from_json(doc.get("accepted"), f"{path} accepted")
    except MirageError as e:
        raise bad(f"its accepted list is malformed: {e}") from None
    for i, (_g, meta) in enumerate(records):
        cost = meta.get("cost")
        if (not isinstance(cost, dict) or not all(_num(cost.get(k)) for k in _COST)
                or not _num(meta.get("found_at_s")) or not _unit(meta.get("unit"))
                or not isinstance(meta.get("verdict"), dict)):
            raise bad(f"accepted μGraph {i} lacks a valid cost, verdict, time or unit")
    if len(records) > events or (events > 0 and not records):
        raise MirageError(f"checkpoint {path} is inconsistent: its statistics count {events} "
                          f"acceptance(s) but its accepted list holds {len(records)} μGraph(s), so "
                          f"it was edited or damaged{fix}")
