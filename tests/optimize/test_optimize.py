"""``superoptimize`` and ``mirage-formal optimize`` end to end on tiny spaces: the real Z3
oracle, float64 screen, prime-field verifier and float64 re-check; output readable by
``mirage-formal verify``; resume; bad input rejected before the search starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mirage_formal import Graph, superoptimize, workloads
from mirage_formal.cli import main
from mirage_formal.errors import MirageError
from mirage_formal.formal import Oracle
from mirage_formal.ir.graph import KERNEL_OP, KernelGraph
from mirage_formal.ir.serialize import load_ugraphs
from mirage_formal.search import Chain, KeepAll, SearchConfig, run_search
from mirage_formal.verify import Verifier
from mirage_formal.verify.float64 import FloatScreen

TINY = {"grid_sizes": [2, 16], "forloop": [1, 4], "max_block_ops": 6}
TINY_ARGS = ["--set", "grid_sizes=[2, 16]", "--set", "forloop=[1, 4]", "--set", "max_block_ops=6"]


def tiny_rmsnorm() -> KernelGraph:
    return workloads.program("rmsnorm", 1, rows=2, h=64, n=64)


def fused(g: KernelGraph) -> bool:
    """Mirage's fused RMSNorm: one kernel looping over k with a sum and an rms accumulator."""
    ks = g.kernels
    if len(ks) != 1 or ks[0].op != KERNEL_OP:
        return False
    bg = ks[0].attr("graph")
    return bg.forloop > 1 and {a.attr("kind") for a in bg.nodes if a.op == "accum"} == {"sum", "rms"}


@pytest.fixture(scope="module")
def result() -> Any:
    return superoptimize(tiny_rmsnorm(), "norm", budget_s=120, overrides=TINY, gpu=False)


def test_finds_fused_rmsnorm_verified_and_rechecked(result: Any) -> None:
    assert result.search.complete and result.accepted
    assert any(fused(a.graph) for a in result.accepted)
    assert len(result.best.kernels) == 1  # the loop fusion or the lift (search/seeds.py)
    costs = [a.cost.seconds for a in result.accepted]
    assert costs == sorted(costs)
    for a in result.accepted:
        assert a.verdict.accepted and a.verdict.bound <= 2.0**-64
        assert a.float64_error < 1e-9
    assert not result.flagged
    tiers = result.oracle_stats
    assert tiers["queries"] > 0 and tiers["z3_unknown"] == 0
    assert any("compiles for sm_90" in n for n in result.codegen_notes)


def _killed_re_check(i: int) -> tuple[float, float]:
    """A forked re-check that dies (as under the OOM killer)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return 0.0, 0.0


def test_threaded_recheck_gives_the_sequential_verdicts(result: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The float64 re-checks run in threads or forked processes (up to RECHECK_THREADS) but
    report what one at a time reports, in the search's order; a budget stop leaves exactly the best ones
    re-checked, the rest listed as not re-checked."""
    from mirage_formal.recheck import _recheck_all
    from mirage_formal.search.state import Accepted
    from mirage_formal.verify.float64 import FloatRecheck

    prog = result.program
    found = [Accepted(a.graph, a.verdict, a.cost, a.found_at_s, 0) for a in result.accepted]
    found += found  # enough to keep several threads busy
    verifier = Verifier(prog, seed=1)
    recheck = FloatRecheck(prog)
    one = _recheck_all(found, verifier, recheck, lambda s: True, threads=1)
    many = _recheck_all(found, verifier, recheck, lambda s: True, threads=4)
    assert [(id(o.graph), o.float64_error) for o in one[0]] == \
        [(id(o.graph), o.float64_error) for o in many[0]]
    assert len(one[0]) == len(found) and not one[1] and not one[2] and not many[2]
    # in forked processes (Linux; before the GPU stage): the same verdicts in the same order
    forked = _recheck_all(found, verifier, recheck, lambda s: True, threads=4, processes=True)
    assert [(id(o.graph), o.float64_error) for o in one[0]] == \
        [(id(o.graph), o.float64_error) for o in forked[0]]
    calls = iter(range(10**6))
    ok, flagged, rest = _recheck_all(found, verifier, recheck, lambda s: next(calls) < 3,
                                     threads=4, processes=True)
    assert [o.graph for o in ok] == [a.graph for a in found[:3]] and rest == found[3:]
    # a re-check process that dies: the same re-checks again on threads, nothing lost
    import mirage_formal.recheck as rc

    monkeypatch.setattr(rc, "_forked_error", _killed_re_check)
    again = _recheck_all(found, verifier, recheck, lambda s: True, threads=4, processes=True)
    assert [(id(o.graph), o.float64_error) for o in one[0]] == \
        [(id(o.graph), o.float64_error) for o in again[0]]
    calls = iter(range(10**6))
    stop_after = 3  # time runs out after three starts
    ok, flagged, rest = _recheck_all(found, verifier, recheck, lambda s: next(calls) < stop_after,
                                     threads=4)
    assert [o.graph for o in ok] == [a.graph for a in found[:stop_after]] and not flagged
    assert rest == found[stop_after:]
    # a re-check that would end past the deadline is not started: the first one's time is
    # known once it is done, and none fits the budget after it
    needs: list[float] = []

    def fits(need: float) -> bool:
        needs.append(need)
        return need == 0.0
    ok, _, rest = _recheck_all(found, verifier, recheck, fits, threads=1)
    assert len(ok) == 1 and rest == found[1:] and needs[1] > 0.0


def test_the_tail_recheck_verifies_restored_ugraphs_with_a_verifier_of_its_own(result: Any) -> None:
    """``_TailRecheck`` (the re-check beside the GPU stage) gives what ``_recheck_all`` gives:
    μGraphs restored from a checkpoint (no verdict object) are verified on its thread by a
    verifier it builds itself, then re-checked; ``join_into`` adds them among the unmeasured
    ones by cost, without repeating one the result already holds, and records its time."""
    from types import SimpleNamespace

    from mirage_formal.recheck import _TailRecheck
    from mirage_formal.search.state import Accepted
    from mirage_formal.verify import Verdict
    from mirage_formal.verify.float64 import FloatRecheck

    prog = result.program
    restored = [Accepted(a.graph, None, a.cost, a.found_at_s, 0) for a in result.accepted]
    job = _TailRecheck(restored, prog, 2.0 ** -64, 0, FloatRecheck(prog), lambda s: True, 2)
    held = result.accepted[0]
    out = SimpleNamespace(accepted=[held], flagged=[], not_rechecked=[], seconds={})
    job.join_into(out)  # type: ignore[arg-type]
    keys = [a.graph.key for a in out.accepted]
    assert sorted(keys) == sorted({a.graph.key for a in result.accepted})  # none twice
    assert all(isinstance(a.verdict, Verdict) and a.verdict.accepted for a in out.accepted[1:])
    assert all(a.float64_error <= 1e-6 for a in out.accepted)
    assert [a.cost.seconds for a in out.accepted] == sorted(a.cost.seconds for a in out.accepted)
    assert not out.flagged and not out.not_rechecked and out.seconds["float64_recheck_beside_gpu"] > 0


def test_saved_ugraphs_verify_on_the_command_line(result: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = result.save(tmp_path)
    graphs = load_ugraphs(path)
    assert [g.key for g in graphs] == [a.graph.key for a in result.accepted]
    assert "Best μGraph" in (tmp_path / "report.md").read_text()
    prog = tmp_path / "prog.json"
    from mirage_formal.ir.serialize import dump_ugraphs
    dump_ugraphs([tiny_rmsnorm()], prog)
    assert main(["verify", str(prog), str(path), "--json", "--seed", "9"]) == 0
    verdicts = json.loads(capsys.readouterr().out)
    assert len(verdicts) == len(graphs) and all(v["accepted"] for v in verdicts)


def test_oracle_pruning_loses_nothing_the_unpruned_search_accepts() -> None:
    """Soundness of pruning on a space small enough to run unpruned."""
    prog = tiny_rmsnorm()
    cfg = SearchConfig.from_preset("norm", **{**TINY, "max_block_ops": 5})

    def checker() -> Chain:
        return Chain(FloatScreen(prog), Verifier(prog, bound=2.0**-32, seed=1, float_check=False))

    pruned = run_search(prog, cfg, Oracle(prog), checker(), progress=False)
    unpruned = run_search(prog, cfg, KeepAll(), checker(), progress=False)
    assert unpruned.accepted
    assert {a.graph.key for a in pruned.accepted} == {a.graph.key for a in unpruned.accepted}
    assert pruned.stats.visited < unpruned.stats.visited


PY_PROGRAM = '''
import mirage_formal as mf

def program(batch=1):
    g = mf.Graph()
    x = g.input((2 * batch, 64), "f16", "X")
    w = g.input((64, 64), "f16", "W")
    g.output(g.op("rms_norm", x) @ w)
    return g
'''


def test_cli_python_program_resume_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "mine.py"
    src.write_text(PY_PROGRAM)
    out = tmp_path / "out"
    args = ["optimize", str(src), "--out", str(out), "--quiet", "--workers", "1", "--no-gpu",
            "--preset", "norm", *TINY_ARGS]
    assert main(args) == 0
    first = [g.key for g in load_ugraphs(out / "ugraphs.json")]
    assert first and (out / "checkpoint.json").exists()
    assert "Best μGraph" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main([*args, "--json"]) == 0          # a finished job is not redone
    assert json.loads(capsys.readouterr().out) == {"already_complete": True, "accepted": len(first),
                                                   "out": str(out)}
    (out / "complete.json").unlink()             # as if stopped after the last unit: resumes
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resumed_units"] == int(summary["units"].split("/")[1]) > 0
    assert [g.key for g in load_ugraphs(out / "ugraphs.json")] == first
    (tmp_path / "empty.py").write_text("x = 1\n")
    assert main(["optimize", str(tmp_path / "empty.py"), "--out", str(out), "--quiet"]) == 2
    assert "defines no 'program'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["optimize", "rmsnorm", "--preset", "nope"], "nope"),
    (["optimize", "rmsnorm", "--set", "max_block_ops=0"], "max_block_ops"),
    (["optimize", "rmsnorm", "--axioms", "eq,nosuchset"], "nosuchset"),
    (["optimize", "no_such_program"], "neither a workload"),
])
def test_cli_bad_input(argv: list[str], message: str, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_api_bad_input() -> None:
    with pytest.raises(MirageError, match="bound"):
        superoptimize(tiny_rmsnorm(), bound=1.5)
    with pytest.raises(MirageError, match="KernelGraph"):
        superoptimize("rmsnorm")  # type: ignore[arg-type]
    with pytest.raises(MirageError, match="budget"):
        superoptimize(tiny_rmsnorm(), budget_s=-1)


def test_a_pre_norm_projection_gets_fused_kernels_accepted() -> None:
    """gelu(rms_norm(X)·W) at 64 x 512 x 1024: gelu reads the output of rms_norm's square root
    (a random function of another's output) over 65 536 elements. Counting collisions over all
    pairs of applications, every fused kernel was inconclusive and the search returned the
    input program alone (no unit finished within 40 s); counted over one output element's
    cones, the whole space is searched in seconds and fused kernels are accepted."""
    g = Graph()
    x, w = g.input((64, 512), "f16", "X"), g.input((512, 1024), "f16", "W")
    g.output(g.gelu(g.matmul(g.rms_norm(x), w)))
    res = superoptimize(g.build(), budget_s=60, workers=1, gpu=False, compile_best=False)
    done, total = res.search.summary()["units"].split("/")
    assert done == total
    fused = [a for a in res.accepted
             if len([n for n in a.graph.nodes if n.op == "kernel"]) == 1]
    assert fused, [a.graph.key for a in res.accepted]


@pytest.mark.parametrize(("gpu", "compile_best", "noted"),
                         [(False, False, False), (False, True, True)])
def test_a_spent_budget_notes_skipped_code_generation_only_where_some_was_asked(
        result: Any, gpu: bool, compile_best: bool, noted: bool) -> None:
    """With the deadline passed before the last phase, the result says code generation was
    skipped only where it would have run (a campaign read the note on a gpu=False,
    compile_best=False call, s52)."""
    from dataclasses import replace

    from mirage_formal import optimize as opt

    out = replace(result, codegen_notes=[])
    opt._codegen_stage(out, result.program, SearchConfig(), None, None,  # type: ignore[arg-type]
                       gpu, 1, 0, deadline=0.0, budget=1.0, compile_best=compile_best,
                       progress=False)
    assert ("budget spent: code generation skipped" in out.codegen_notes) is noted
