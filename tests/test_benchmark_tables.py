"""The benchmark scripts' op tables cover the registry: a program written from any
kernel-level op can be timed beside PyTorch (``benchmarks/gpu_bench.torch_ops``, used by
``gpu_optimize.py`` for every row, outside programs included), and what handover_rule.py
reads from the rows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gpu_bench import torch_ops

from mirage_formal.ir.ops import KERNEL, REGISTRY


def test_torch_ops_cover_every_kernel_level_op() -> None:
    ops = {name for name, d in REGISTRY.items() if KERNEL in d.levels}
    missing = ops - set(torch_ops(object()))
    assert not missing, f"benchmarks/gpu_bench.torch_ops lacks {sorted(missing)}"


def test_handover_rule_reads_when_the_top_candidates_were_found() -> None:
    """benchmarks/handover_rule.py: the top k's last find is the latest find among the k
    best-estimated μGraphs (μGraphs not found by the search, the input itself, left out), and
    the winner is the best measured one."""
    from handover_rule import top_changed_at, winner_found_at

    found = [{"found_at_s": 28.9, "measured_us": 37.0}, {"found_at_s": None, "measured_us": 40.0},
             {"found_at_s": 15.1, "measured_us": 36.0}, {"found_at_s": 90.0, "measured_us": None}]
    assert top_changed_at(found, 3) == 28.9
    assert top_changed_at(found, 4) == 90.0
    assert top_changed_at(found[1:2], 1) is None
    assert winner_found_at(found) == 15.1
    assert winner_found_at(found[3:]) is None


def test_handover_rule_skips_json_that_is_not_rows(tmp_path: Path) -> None:
    """A glob over a results folder also passes other benchmarks' JSON (the decoder layer's):
    those are skipped, a gpu_optimize.json or a merged table is read."""
    import json

    from handover_rule import rows_of

    row = {"workload": "gqa", "b": 1}
    for doc, want in [({"env": {}, "rows": [row]}, [row]), ([row], [row]),
                      ({"layer": {}, "rows": [{"batch": 8}]}, None), ({"variants": []}, None)]:
        p = tmp_path / "f.json"
        p.write_text(json.dumps(doc))
        assert rows_of(p) == want


def test_the_torch_baseline_of_a_program_of_several_outputs_returns_each() -> None:
    """gpu_bench.torch_program returns a tuple for a program of several outputs (a bridge
    region, ``search_outside.decoder_post_attention``), each equal to the float64 reference;
    gpu_optimize compares every one of them with our kernel's."""
    import numpy as np
    import pytest

    torch = pytest.importorskip("torch")
    from gpu_bench import torch_program

    import mirage_formal as mf
    from mirage_formal.semantics import run_reference
    from mirage_formal.semantics.reference import domain_inputs

    g = mf.Graph()
    x, r, wo = g.input((1, 1, 1, 32), "f16", "x"), g.input((1, 4, 1, 8), "f16", "r"), g.input((4, 8, 32), "f16", "wo")
    gain, wg = g.input((32,), "f16", "gain"), g.input((32, 16), "f16", "wg")
    a = g.add(x, g.sum(g.matmul(r, wo), axis=-3, keepdims=True))
    h = g.mul(g.rms_norm(a, eps=1e-6), gain)
    g.output(a, h, g.matmul(h, wg))
    prog = g.build()
    xs = domain_inputs(prog, np.random.default_rng(4))
    vals = [xs[n.attr("name")] for n in prog.inputs] if isinstance(xs, dict) else list(xs)
    got = torch_program(prog)(*[torch.from_numpy(np.asarray(v, dtype=np.float64)) for v in vals])
    assert isinstance(got, tuple) and len(got) == 3
    for want, t in zip(run_reference(prog, xs), got, strict=True):
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-9, atol=1e-12)


def _programs_with_idioms() -> list[tuple[str, object]]:
    from search_outside import PROGRAMS

    from mirage_formal import workloads

    progs = [(f"outside:{k}", f(1)) for k, f in sorted(PROGRAMS.items())]
    return progs + [(w, workloads.program(w, 1)) for w in sorted(workloads.PROGRAMS)]


def test_the_idiomatic_torch_baseline_computes_each_program() -> None:
    """gpu_bench.torch_idiomatic (a program as a PyTorch user writes it: F.layer_norm,
    F.rms_norm, torch.softmax, F.scaled_dot_product_attention where the program has them)
    equals the op-by-op form in float64 on every outside program and workload, and takes
    those calls where the program has them: ViT's layer norms, its attention (and every
    benchmark attention row), rmsnorm."""
    import numpy as np
    import pytest

    torch = pytest.importorskip("torch")
    from gpu_bench import torch_idiomatic, torch_program

    calls: dict[str, list[str]] = {}
    for name, prog in _programs_with_idioms():
        got = torch_idiomatic(prog)  # type: ignore[arg-type]
        if got is None:
            continue
        fn, calls[name] = got
        rng = np.random.default_rng(3)
        xs = [torch.from_numpy(rng.uniform(0.5, 1.0, n.shape)) for n in prog.inputs]  # type: ignore[attr-defined]
        want, have = torch_program(prog)(*xs), fn(*xs)  # type: ignore[arg-type]
        for w, h in zip(want if isinstance(want, tuple) else (want,),
                        have if isinstance(have, tuple) else (have,), strict=True):
            np.testing.assert_allclose(h.numpy(), w.numpy(), rtol=1e-7, atol=1e-9, err_msg=name)
    assert calls["outside:vit_ln_qkv"] == ["layer_norm"]
    assert calls["outside:vit_proj_ln"] == ["layer_norm"]
    assert calls["outside:vit_attention"] == ["scaled_dot_product_attention"]
    assert "scaled_dot_product_attention" in calls["gqa"]
    assert calls["rmsnorm"] == ["rms_norm"]


def test_kernel_breakdown_reads_one_call_per_kernel_from_a_trace(tmp_path: Path) -> None:
    """benchmarks/kernel_breakdown.py: the flush's fill kernels left out, each kernel of one
    call gets its median over the profiled calls and its launch arguments."""
    import json

    from kernel_breakdown import kernel_rows

    events = []
    for rep in range(3):
        events += [{"cat": "kernel", "name": "void at::FillFunctor<unsigned char>", "ts": rep * 100, "dur": 50},
                   {"cat": "kernel", "name": "mf_a", "ts": rep * 100 + 10, "dur": 5 + rep,
                    "args": {"grid": [2, 1, 1], "registers per thread": 40}},
                   {"cat": "kernel", "name": "mf_b", "ts": rep * 100 + 20, "dur": 7 - rep},
                   {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": rep * 100 + 5, "dur": 1}]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events[::-1]}))
    rows = kernel_rows(trace, 3)
    assert [(r["name"], r["us"], r["grid"], r["regs"]) for r in rows] == [
        ("mf_a", 6, [2, 1, 1], 40), ("mf_b", 6, None, None)]
