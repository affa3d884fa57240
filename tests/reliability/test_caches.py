"""Caches that check themselves (issue 14): oracle rows carry checksums and the package
version, a poisoned row is dropped and recomputed, a run with 0 accepted after cached prunes
searches again uncached, ``--fresh`` clears the oracle cache, a damaged cubin is rebuilt and
never used, a checkpoint that contradicts its statistics is refused. NVRTC compiles without a
GPU, so the cubin checks run on CPU-only CI too."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest

from mirage_formal import superoptimize, workloads
from mirage_formal.cli import main
from mirage_formal.codegen.nvrtc import compile_cubin
from mirage_formal.errors import CacheWarning, MirageError
from mirage_formal.formal import cache as cache_mod
from mirage_formal.formal.cache import DiskCache, checksum
from mirage_formal.formal.oracle import Oracle
from mirage_formal.ir.graph import KernelGraph
from mirage_formal.ir.serialize import dump_ugraphs

TINY = {"grid_sizes": [2, 16], "forloop": [1, 4], "max_block_ops": 6}
TINY_ARGS = ["--set", "grid_sizes=[2, 16]", "--set", "forloop=[1, 4]", "--set", "max_block_ops=6"]


def tiny() -> KernelGraph:
    return workloads.program("rmsnorm", 1, rows=2, h=64, n=64)


def _rows(db: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(db)
    try:
        return list(con.execute("SELECT space, expr, value FROM decisions"))
    finally:
        con.close()


def _copy_db(src: Path, dst: Path) -> None:
    """Copy a WAL-mode SQLite file with what its write-ahead log still holds."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b)
    a.close()
    b.close()


def _poison(db: Path, every: int = 1, forge: bool = False) -> int:
    """Set keep=false on every ``every``-th decision; ``forge`` also fixes up the checksums."""
    con = sqlite3.connect(db)
    n = 0
    for i, (sp, e, v) in enumerate(con.execute("SELECT space, expr, value FROM decisions").fetchall()):
        if i % every:
            continue
        d = json.loads(v)
        d["keep"] = False
        t = json.dumps(d, sort_keys=True)
        if forge:
            con.execute("UPDATE decisions SET value = ?, checksum = ? WHERE space = ? AND expr = ?",
                        (t, checksum(sp, e, t), sp, e))
        else:
            con.execute("UPDATE decisions SET value = ? WHERE space = ? AND expr = ?", (t, sp, e))
        n += 1
    con.commit()
    con.close()
    return n


def test_rows_are_checked_dropped_and_recomputed(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    c = DiskCache(db)
    c.put("s", "e1", {"keep": True})
    c.put("s", "e2", {"keep": True})
    assert c.get("s", "e1") == {"keep": True}
    _poison(db, every=2)
    with pytest.warns(CacheWarning, match="failed its checksum"):
        assert DiskCache(db).get("s", "e1") is None
    assert len(DiskCache(db)) == 1          # the bad row is gone
    con = sqlite3.connect(db)
    con.execute("UPDATE decisions SET value = 'not json', checksum = 'x'")
    con.commit()
    con.close()
    c2 = DiskCache(db)
    with pytest.warns(CacheWarning):
        assert c2.get("s", "e2") is None
    assert c2.dropped == 1 and len(c2) == 0


def test_keyed_by_package_version_and_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "c.sqlite"
    DiskCache(db).put("s", "e", {"keep": True})
    monkeypatch.setattr(cache_mod, "_package_version", lambda: "9.9.9")
    other = DiskCache(db)
    assert other.get("s", "e") is None      # another release never reads it
    monkeypatch.undo()
    c = DiskCache(db)
    assert c.get("s", "e") == {"keep": True}
    c.clear()
    assert len(c) == 0


def test_old_layout_and_garbage_file(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE decisions (space TEXT, expr TEXT, value TEXT, PRIMARY KEY (space, expr))")
    con.execute("INSERT INTO decisions VALUES ('s', 'e', '{\"keep\": false}')")
    con.commit()
    con.close()
    with pytest.warns(CacheWarning, match="older version"):
        assert len(DiskCache(db)) == 0
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(MirageError, match="cannot open SQLite database"):
        DiskCache(bad)


def test_refreshing_cache_neither_reads_nor_keeps_bad_rows(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    prog = tiny()
    o = Oracle(prog, cache=db)
    x = prog.inputs[0]
    keep = o.decide(x).keep
    assert keep
    _poison(db, forge=True)
    assert not Oracle(prog, cache=db).decide(x).keep           # a forged row is believed...
    fresh = Oracle(prog, cache=DiskCache(db, reads=False))
    assert fresh.decide(x).keep                                 # ...until refreshed
    assert Oracle(prog, cache=db).decide(x).keep                # and the row is rewritten


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("warm")
    res = superoptimize(tiny(), "norm", budget_s=120, overrides=TINY, gpu=False, compile_best=False,
                        oracle_cache=d / "oracle_cache.sqlite")
    assert res.accepted
    return d / "oracle_cache.sqlite"


def test_zero_accepted_after_cached_prunes_searches_again(warm_cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that accepts nothing after reading decisions from the cache is run again with
    every decision recomputed. (The search may still accept a μGraph the oracle is never asked
    about, so the first search's result is emptied here to reach the 0-accepted case.)"""
    import mirage_formal.optimize as opt

    db = tmp_path / "oracle_cache.sqlite"
    _copy_db(warm_cache, db)
    assert _poison(db, forge=True) > 0
    real = opt.run_search
    calls: list[bool] = []

    def first_finds_nothing(*a: Any, **k: Any) -> Any:
        res = real(*a, **k)
        calls.append(bool(k["components"].refresh))
        return dataclasses.replace(res, accepted=[]) if len(calls) == 1 else res

    monkeypatch.setattr(opt, "run_search", first_finds_nothing)
    with pytest.warns(CacheWarning, match="searching again with every decision recomputed"):
        res = superoptimize(tiny(), "norm", budget_s=120, overrides=TINY, gpu=False,
                            compile_best=False, oracle_cache=db)
    assert calls == [False, True]
    assert res.accepted and res.notes and "searching again" in res.report()
    # the forged rows were rewritten with recomputed decisions: a plain run now finds them all
    monkeypatch.setattr(opt, "run_search", real)
    again = superoptimize(tiny(), "norm", budget_s=120, overrides=TINY, gpu=False,
                          compile_best=False, oracle_cache=db)
    assert len(again.accepted) == len(res.accepted)


def test_fresh_clears_the_oracle_cache(warm_cache: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    db = out / "oracle_cache.sqlite"
    _copy_db(warm_cache, db)
    _poison(db, forge=True)
    prog = tmp_path / "p.json"
    dump_ugraphs([tiny()], prog)
    args = ["optimize", str(prog), "--out", str(out), "--quiet", "--workers", "1", "--no-gpu",
            "--preset", "norm", *TINY_ARGS, "--fresh"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)     # no re-run: the cache was cleared first
        assert main(args) == 0
    assert "already complete" not in capsys.readouterr().out
    assert main(args[:-1]) == 0
    assert "already complete" in capsys.readouterr().out


def test_checkpoint_that_contradicts_its_stats_is_refused(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    prog = tmp_path / "p.json"
    dump_ugraphs([tiny()], prog)
    args = ["optimize", str(prog), "--out", str(out), "--quiet", "--workers", "1", "--no-gpu",
            "--preset", "norm", *TINY_ARGS]
    assert main(args) == 0
    ck = out / "checkpoint.json"
    doc = json.loads(ck.read_text())
    doc["accepted"]["ugraphs"] = []
    ck.write_text(json.dumps(doc))
    (out / "complete.json").unlink()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is inconsistent" in err and "holds 0 μGraph(s)" in err and "--fresh" in err
    doc["stats"]["accepted"] = "many"
    ck.write_text(json.dumps(doc))
    assert main(args) == 2
    assert main([*args, "--fresh"]) == 0


def test_report_reads_without_the_code(warm_cache: Path) -> None:
    res = superoptimize(tiny(), "norm", budget_s=120, overrides=TINY, gpu=False, compile_best=False,
                        oracle_cache=warm_cache)
    text = res.report()
    assert "| program (input) |" in text and "1.00×" in text and "Columns:" in text
    head = text.split("## Best μGraph")[0]
    assert "None" not in head and "{" not in head
    search = dataclasses.replace(res.search, accepted=[], time_to_first_s=None, time_to_best_s=None)
    t2 = dataclasses.replace(res, accepted=[], flagged=[], search=search).report()
    assert "none accepted" in t2 and "None" not in t2 and "- (none accepted)" in t2


SRC = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'


def _only(d: Path, suffix: str) -> Path:
    (p,) = d.glob(f"*{suffix}")
    return p


@pytest.mark.parametrize("damage", ["garbage", "flip", "no-record", "other-source"])
def test_damaged_cubin_is_rebuilt_never_used(tmp_path: Path, damage: str) -> None:
    good = compile_cubin(SRC, cache=tmp_path)
    cubin = _only(tmp_path, ".cubin")
    record = _only(tmp_path, ".json")
    assert json.loads(record.read_text())["source_sha256"]
    if damage == "garbage":
        cubin.write_bytes(bytes(range(100)))
    elif damage == "flip":
        b = bytearray(good)
        b[len(b) // 2] ^= 0xFF
        cubin.write_bytes(bytes(b))
    elif damage == "no-record":
        record.unlink()
    else:
        rec: dict[str, Any] = json.loads(record.read_text())
        rec["source_sha256"] = "0" * 64
        record.write_text(json.dumps(rec))
    with pytest.warns(CacheWarning, match="dropped, compiling again"):
        again = compile_cubin(SRC, cache=tmp_path)
    assert again == good
    assert cubin.read_bytes() == good
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert compile_cubin(SRC, cache=tmp_path) == good     # and the rebuilt entry checks out


def test_row_with_invalid_utf8_reads_as_a_miss(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    c = DiskCache(db)
    c.put("s", "e", {"keep": True})
    c.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE decisions SET value = CAST(X'80FF7B7D' AS TEXT)")
    con.commit()
    con.close()
    with pytest.warns(CacheWarning):
        assert DiskCache(db).get("s", "e") is None
