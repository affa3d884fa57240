"""Locating the top-level data folders (axioms/, search/, codegen/).

In a wheel they ship as package data under ``mirage_formal/_data/<name>`` (setup.py copies
them at build time); in a source checkout or an editable install they are the folders at the
repository root. :func:`data_dir` finds either, so code never cares how it was installed.
Every loader also takes an explicit directory, which wins. Imports only the errors.
"""

from __future__ import annotations

from pathlib import Path

from mirage_formal.errors import ResourceError

DATA_FOLDERS = ("axioms", "search", "codegen")


def data_dir(name: str) -> Path:
    """The folder holding data set ``name`` (one of DATA_FOLDERS)."""
    if name not in DATA_FOLDERS:
        raise ResourceError(f"unknown data folder {name!r}; known: {', '.join(DATA_FOLDERS)}")
    here = Path(__file__).resolve().parent
    for cand in (here / "_data" / name, here.parent / name):
        if cand.is_dir():
            return cand
    raise ResourceError(
        f"data folder {name!r} not found in {here / '_data'} or {here.parent}; reinstall the "
        "package or pass the directory explicitly"
    )
