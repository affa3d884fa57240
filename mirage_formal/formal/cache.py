"""The oracle's disk cache: SQLite in WAL mode, safe for concurrent worker processes, and
checking itself.

Key: (``space``, ``expr``). ``space`` is what a decision depends on besides the candidate:
the oracle passes a hash of the axiom set's content, the reference expressions, the encoding
bounds and the encoding version, and this module mixes in the package version, so a cache
written by another release is never read. ``expr`` is the candidate expression's content key.

Every row carries a checksum (SHA-256 of space, expr and value). A row whose checksum or JSON
does not match — a damaged file, a hand edit — is deleted, reported once per process as a
:class:`CacheWarning`, and read as a miss, so the decision is recomputed and written again;
:attr:`DiskCache.dropped` counts them. ``reads=False`` opens the cache for refreshing: reads
miss, writes replace (the optimizer uses it to re-run queries it once answered from the cache).
Writers use ``INSERT OR IGNORE`` (decisions are deterministic, so the first writer wins and
later ones agree); readers never block writers in WAL mode, and a busy timeout covers
writer/writer contention. A file of an older layout is emptied and rebuilt.

Imports nothing of ours but the errors and the package version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from mirage_formal.errors import CacheWarning, MirageError

LAYOUT = "checked-v2"
"""Bumped when the table layout changes; an older file is emptied (its rows cannot be checked)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    space TEXT NOT NULL,
    expr TEXT NOT NULL,
    value TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (space, expr)
) WITHOUT ROWID
"""


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mirage-formal")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def checksum(space: str, expr: str, value: str) -> str:
    """The checksum stored with (and verified on every read of) a row."""
    h = hashlib.sha256()
    for part in (space, expr, value):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class DiskCache:
    """A persistent, self-checking map (space, expr) -> JSON-able dict, shared by processes."""

    def __init__(self, path: str | Path, timeout_s: float = 30.0, *, reads: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.timeout_s = timeout_s
        self.reads = reads
        self.salt = f"mirage-formal {_package_version()} {LAYOUT}"
        self.dropped = 0
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._set_up()
                break
            except sqlite3.OperationalError as e:
                # Switching a new file to WAL takes an exclusive lock, and SQLite answers
                # "database is locked" at once (its busy timeout does not cover this step)
                # when another process is setting up the same file: wait and try again.
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise self._unopenable(e) from None
                self._rollback()
                time.sleep(0.05)
            except (sqlite3.Error, UnicodeDecodeError) as e:  # a damaged schema's text, too
                raise self._unopenable(e) from None

    def _set_up(self) -> None:
        con = self._con()
        con.execute("PRAGMA journal_mode=WAL")
        cols = [r[1] for r in con.execute("PRAGMA table_info(decisions)")]
        if cols and "checksum" not in cols:
            warnings.warn(f"oracle cache {self.path}: written by an older version without "
                          "checksums; emptied, decisions will be recomputed", CacheWarning,
                          stacklevel=3)
            con.execute("DROP TABLE decisions")
        con.execute(_SCHEMA)
        con.commit()

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._con().rollback()

    def _unopenable(self, e: BaseException) -> MirageError:
        return MirageError(f"oracle cache {self.path}: cannot open SQLite database: {e}; "
                           "delete the file (or run with --fresh) to start a new one")

    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=self.timeout_s)
            # damaged bytes in a text column read as U+FFFD (then fail the checksum), not as
            # a UnicodeDecodeError
            con.text_factory = lambda b: b.decode("utf-8", "replace")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def _space(self, space: str) -> str:
        return hashlib.sha256(f"{self.salt}\0{space}".encode()).hexdigest()[:32]

    def get(self, space: str, expr: str) -> dict[str, Any] | None:
        """The stored value, or None (a miss, a refreshing cache, or a bad row now dropped)."""
        if not self.reads:
            return None
        sp = self._space(space)
        try:
            row = self._con().execute(
                "SELECT value, checksum FROM decisions WHERE space = ? AND expr = ?",
                (sp, expr)).fetchone()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise MirageError(f"oracle cache {self.path}: unreadable ({e}); delete it or run with "
                              "--fresh") from None
        if row is None:
            return None
        value, stored = row
        try:
            ok = isinstance(value, str) and stored == checksum(sp, expr, value)
            out = json.loads(value) if ok else None
        except ValueError:
            out = None
        if not isinstance(out, dict):
            self._drop(sp, expr)
            return None
        return out

    def _drop(self, sp: str, expr: str) -> None:
        self.dropped += 1
        if self.dropped == 1:
            warnings.warn(f"oracle cache {self.path}: a row failed its checksum; bad rows are "
                          "dropped and their decisions recomputed", CacheWarning, stacklevel=3)
        try:
            con = self._con()
            con.execute("DELETE FROM decisions WHERE space = ? AND expr = ?", (sp, expr))
            con.commit()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise MirageError(f"oracle cache {self.path}: damaged beyond repair ({e}); delete it "
                              "or run with --fresh") from None

    def put(self, space: str, expr: str, value: dict[str, Any]) -> None:
        sp = self._space(space)
        text = json.dumps(value, sort_keys=True)
        verb = "INSERT OR IGNORE" if self.reads else "INSERT OR REPLACE"
        try:
            con = self._con()
            con.execute(f"{verb} INTO decisions (space, expr, value, checksum) VALUES (?, ?, ?, ?)",
                        (sp, expr, text, checksum(sp, expr, text)))
            con.commit()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise MirageError(f"oracle cache {self.path}: cannot write ({e}); delete it or run "
                              "with --fresh") from None

    def clear(self) -> None:
        """Delete every row (``--fresh``)."""
        con = self._con()
        con.execute("DELETE FROM decisions")
        con.commit()

    def __len__(self) -> int:
        return int(self._con().execute("SELECT COUNT(*) FROM decisions").fetchone()[0])

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
