"""The oracle's disk cache: SQLite in WAL mode, safe for concurrent worker processes.

Key: (``space``, ``expr``) where ``space`` hashes everything a decision depends on besides
the candidate (axiom-set digest, reference expressions, encoding bounds, format version) and
``expr`` is the candidate expression's content key. Value: the decision as JSON. Writers use
``INSERT OR IGNORE`` (decisions are deterministic, so the first writer wins and later ones
agree); readers never block writers in WAL mode, and a busy timeout covers writer/writer
contention. Imports nothing of ours but the errors.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from mirage_formal.errors import MirageError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    space TEXT NOT NULL,
    expr TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (space, expr)
) WITHOUT ROWID
"""


class DiskCache:
    """A persistent map (space, expr) -> JSON-able dict, shared by processes."""

    def __init__(self, path: str | Path, timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.timeout_s = timeout_s
        try:
            con = self._con()
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(_SCHEMA)
            con.commit()
        except sqlite3.Error as e:
            raise MirageError(f"oracle cache {self.path}: cannot open SQLite database: {e}; "
                              "delete the file or pass another cache path") from None

    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=self.timeout_s)
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def get(self, space: str, expr: str) -> dict[str, Any] | None:
        row = self._con().execute(
            "SELECT value FROM decisions WHERE space = ? AND expr = ?", (space, expr)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put(self, space: str, expr: str, value: dict[str, Any]) -> None:
        con = self._con()
        con.execute("INSERT OR IGNORE INTO decisions (space, expr, value) VALUES (?, ?, ?)",
                    (space, expr, json.dumps(value, sort_keys=True)))
        con.commit()

    def __len__(self) -> int:
        return int(self._con().execute("SELECT COUNT(*) FROM decisions").fetchone()[0])

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
