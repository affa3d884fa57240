"""Mutation fuzzing of every file the package reads: seeds, hypothesis strategies that damage
them, and one loader per format that classifies a mutant as ``accepted`` or ``refused``.

Shared by ``tests/fuzz/test_fuzz_files.py`` (a few examples per format, in CI) and
``benchmarks/fuzz_files.py`` (many more, with counts). The rules every loader must keep:
only the package's own exceptions (:class:`MirageError`) escape, never a Python error; no
mutant takes longer than :data:`HANG_S`; and a mutant the rules below know to be invalid is
never accepted (a type change of a field our JSON reads; a duplicated definition or a
non-finite number in the text form; a cache row whose bytes changed, read as anything but a
miss or the original value).
"""

from __future__ import annotations

import copy
import json
import re
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from mirage_formal import workloads
from mirage_formal.checkpoints import check_checkpoint
from mirage_formal.errors import MirageError
from mirage_formal.formal.axioms import axioms_dir, read_axiom_file
from mirage_formal.formal.cache import DiskCache
from mirage_formal.ir.serialize import dumps_ugraphs, load_any
from mirage_formal.ir.text import to_text
from mirage_formal.search import SearchConfig
from mirage_formal.search.space import Stats

HANG_S = 10.0
DATA = Path(__file__).resolve().parent / "data"
_TMP = Path(tempfile.mkdtemp(prefix="mf-fuzz-"))


class InvalidAccepted(AssertionError):
    """A mutant known to be invalid was accepted."""


# ---------------------------------------------------------------- seeds

def small_graphs() -> list[Any]:
    return [workloads.program("rmsnorm", 1, rows=2, h=64, n=64),
            workloads.handwritten("rmsnorm", 1, rows=2, h=256, n=128, col_tile=32, k_tile=64)]


def seed_our_json() -> str:
    return dumps_ugraphs(small_graphs(), [{"note": "seed"}, {}])


def seed_mirage() -> str:
    return (DATA / "mirage_rmsnorm.json").read_text()


def seed_text() -> str:
    return to_text(small_graphs()[1])


def seed_axioms() -> str:
    return (axioms_dir() / "eq.toml").read_text()


def seed_preset() -> str:
    return (Path(__file__).resolve().parents[1] / "search" / "norm.toml").read_text()


CHECKPOINT_KEY = "fuzz-key"


def seed_checkpoint() -> str:
    g = small_graphs()[1]
    meta = {"cost": {"us": 3.5, "launches": 1, "dram_bytes": 100.0, "l2_bytes": 0.0, "flops": 10.0},
            "found_at_s": 0.5, "unit": 1, "verdict": {"accepted": True, "type": "Verdict"}}
    stats = Stats(visited=10, verified=2, accepted=1).as_dict()
    doc = {"format": "mirage-formal.search-checkpoint", "version": 1, "key": CHECKPOINT_KEY,
           "done": [0, 1], "elapsed_s": 2.0, "stats": stats,
           "accepted": json.loads(dumps_ugraphs([g], [meta]))}
    return json.dumps(doc)


# ---------------------------------------------------------------- mutations

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, 7]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4),
    st.just([]), st.just({}), st.lists(st.integers(-1, 3), max_size=4),
    st.recursive(st.integers(0, 2), lambda c: st.lists(c, max_size=2), max_leaves=4),
)
SPECIAL_NUMBERS = ["0", "-1", "1e400", "-1e400", "99999999999999999999", "Infinity", "NaN", "2.5",
                   "inf", "1" * 5000]


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _get(d: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        d = d[k]
    return d


def _jtype(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "int" if isinstance(v, int) else "float"
    return type(v).__name__


@dataclass
class Mutant:
    text: str
    must_refuse: str | None = None
    """Why this mutant is known to be invalid (None: it may be valid)."""


@st.composite
def text_mutants(draw: st.DrawFn, text: str, kind: str = "") -> Mutant:
    """Line- and token-level damage to a text file."""
    lines = text.splitlines()
    must: str | None = None
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["del", "dup", "swap", "number", "token", "truncate", "insert"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "del":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "number":
            nums = list(re.finditer(r"(?<![%\w.])-?\d+(?:\.\d+)?(?![\w.])", lines[i]))
            if nums:
                m = draw(st.sampled_from(nums))
                new = draw(st.sampled_from(SPECIAL_NUMBERS))
                lines[i] = lines[i][: m.start()] + new + lines[i][m.end():]
        elif op == "token":
            words = re.findall(r"\w+", text)
            toks = list(re.finditer(r"\w+", lines[i]))
            if toks and words:
                m = draw(st.sampled_from(toks))
                lines[i] = lines[i][: m.start()] + draw(st.sampled_from(words)) + lines[i][m.end():]
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            lines.insert(i, draw(st.text(alphabet="[]{}()=,:%\"' 0123456789abcxyz", max_size=12)))
    if kind == "text":
        must = _text_invalid(lines)
    return Mutant("\n".join(lines) + "\n", must)


def _text_invalid(lines: list[str]) -> str | None:
    """A reason the text form must be refused: a name defined twice in one scope (the top
    level, or one kernel's block), or a number too large for a float."""
    scopes: list[set[str]] = [set()]
    for ln in lines:
        s = ln.strip()
        if "1e400" in s:
            return f"non-finite number in {s!r}"
        m = re.match(r"(%b?\d+) = ", s)
        if m:
            if m.group(1) in scopes[-1]:
                return f"{m.group(1)} defined twice"
            scopes[-1].add(m.group(1))
            if s.endswith(" {"):
                scopes.append(set())
        elif s == "}" and len(scopes) > 1:
            scopes.pop()
    return None


@st.composite
def json_mutants(draw: st.DrawFn, text: str, read_fields: bool) -> Mutant:
    """Structural damage to a JSON document, then sometimes textual damage on top.
    ``read_fields``: every field outside ``meta`` is read, so a type change must be refused."""
    doc = json.loads(text)
    must: str | None = None
    deleted = False
    touched: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(doc, path[:-1])
        op = draw(st.sampled_from(["set", "set", "set", "delete", "copy"]))
        must = None  # only the last edit is judged (earlier ones may have been overwritten)
        if op == "delete":
            del parent[path[-1]]
            deleted = True  # list positions shift: no judgement after a deletion
            continue
        old = parent[path[-1]]
        new = copy.deepcopy(_get(doc, draw(st.sampled_from(paths)))) if op == "copy" else draw(VALUES)
        parent[path[-1]] = new
        # judged against the seed's value: only when no earlier edit touched this place
        fresh = not any(p[: len(path)] == path or path[: len(p)] == p for p in touched)
        touched.append(path)
        t_old, t_new = _jtype(old), _jtype(new)
        if (read_fields and fresh and not deleted and "meta" not in path and "attrs" not in path
                and t_old != t_new and not (t_old == "float" and t_new == "int")):
            must = f"type of {'.'.join(map(str, path))} changed from {t_old} to {t_new}"
    out = json.dumps(doc)
    if draw(st.integers(0, 3)) == 0:
        m = draw(text_mutants(out))
        return Mutant(m.text, None)
    return Mutant(out, must)


# ---------------------------------------------------------------- loaders

def _file(text: str, suffix: str) -> Path:
    p = _TMP / f"mutant{suffix}"
    p.write_text(text)
    return p


def load_our_json(text: str) -> None:
    load_any(_file(text, ".json"))


def load_mirage(text: str) -> None:
    load_any(_file(text, ".json"), ["X", "W"])


def load_text(text: str) -> None:
    load_any(_file(text, ".txt"))


def load_axioms(text: str) -> None:
    read_axiom_file(_file(text, ".toml"))


def load_preset(text: str) -> None:
    p = _TMP / "fuzzpreset.toml"
    p.write_text(text)
    SearchConfig.from_preset(str(p))


def load_checkpoint(text: str) -> None:
    from mirage_formal.search.driver import _read_checkpoint

    p = _file(text, ".ckpt.json")
    check_checkpoint(p)
    _read_checkpoint(p, CHECKPOINT_KEY)


@dataclass(frozen=True)
class Target:
    name: str
    seed: Callable[[], str]
    mutants: Callable[[str], st.SearchStrategy[Mutant]]
    load: Callable[[str], None]


TARGETS = {t.name: t for t in [
    Target("our_json", seed_our_json, lambda s: json_mutants(s, True), load_our_json),
    Target("mirage_json", seed_mirage, lambda s: json_mutants(s, False), load_mirage),
    Target("text_form", seed_text, lambda s: text_mutants(s, "text"), load_text),
    Target("axiom_toml", seed_axioms, lambda s: text_mutants(s), load_axioms),
    Target("preset_toml", seed_preset, lambda s: text_mutants(s), load_preset),
    Target("checkpoint", seed_checkpoint, lambda s: json_mutants(s, False), load_checkpoint),
]}


def classify(target: Target, m: Mutant) -> str:
    """``accepted`` or ``refused``; raises on a Python error, a hang, or an invalid acceptance."""
    t0 = time.perf_counter()
    try:
        target.load(m.text)
        outcome = "accepted"
    except MirageError:
        outcome = "refused"
    dt = time.perf_counter() - t0
    if dt > HANG_S:
        raise AssertionError(f"{target.name}: a mutant took {dt:.1f} s")
    if outcome == "accepted" and m.must_refuse:
        raise InvalidAccepted(f"{target.name}: accepted although {m.must_refuse}")
    return outcome


# ---------------------------------------------------------------- the oracle cache

@st.composite
def cache_damage(draw: st.DrawFn) -> list[tuple[str, int, Any]]:
    """A list of (what, row, new value): ``value``/``checksum`` edits of rows, or ``bytes``
    overwriting part of the file."""
    n = draw(st.integers(1, 4))
    out = []
    for _ in range(n):
        what = draw(st.sampled_from(["value", "value", "checksum", "bytes", "blob"]))
        row = draw(st.integers(0, 7))
        val: Any = (draw(st.one_of(st.text(max_size=20), st.sampled_from(
            ['{"keep": false}', '{"keep": true}', "[]", "null", "1e400", "{"])))
            if what != "bytes" else draw(st.binary(min_size=1, max_size=64)))
        out.append((what, row, val))
    return out


def cache_round(damage: list[tuple[str, int, Any]]) -> str:
    """Write 8 rows, damage them, read them back: every read must be a miss or the original
    value; only MirageError may escape. Returns ``intact``, ``dropped`` or ``refused``."""
    import warnings

    d = Path(tempfile.mkdtemp(dir=_TMP))
    db = d / "c.sqlite"
    c = DiskCache(db)
    orig = {f"e{i}": {"keep": bool(i % 2), "reason": f"r{i}"} for i in range(8)}
    for k, v in orig.items():
        c.put("space", k, v)
    c.close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    keys = [r[0] for r in con.execute("SELECT expr FROM decisions ORDER BY expr")]
    for what, row, val in damage:
        if what == "bytes":
            continue
        k = keys[row % len(keys)]
        if what == "blob":
            con.execute("UPDATE decisions SET value = ? WHERE expr = ?", (val.encode(), k))
        else:
            con.execute(f"UPDATE decisions SET {what} = ? WHERE expr = ?", (val, k))
    con.commit()
    con.close()
    for what, row, val in damage:
        if what == "bytes":
            raw = bytearray(db.read_bytes())
            at = (row * 997) % max(1, len(raw) - len(val))
            raw[at:at + len(val)] = val
            db.write_bytes(bytes(raw))
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c2 = DiskCache(db)
            got = {k: c2.get("space", k) for k in orig}
            c2.close()
    except MirageError:
        return "refused"
    if time.perf_counter() - t0 > HANG_S:
        raise AssertionError("the cache took too long")
    for k, v in got.items():
        if v is not None and v != orig[k]:
            raise InvalidAccepted(f"cache row {k} read as {v}, written as {orig[k]}")
    return "intact" if all(v is not None for v in got.values()) else "dropped"
