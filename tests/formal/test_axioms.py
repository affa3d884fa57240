"""Axiom files: loading, selection by name, malformed files rejected with file and line, and
every axiom checked against float64 evaluation on random tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mirage_formal.errors import FormatError, MirageError
from mirage_formal.formal.axiom_check import check_axiom
from mirage_formal.formal.axioms import available_sets, axioms_dir, load_axioms

ALL = ["eq", "sub", "ext_exp_sqrt"]


def test_sets_available_and_named() -> None:
    assert {"eq", "sub", "ext_exp_sqrt"} <= set(available_sets())
    a = load_axioms(ALL)
    assert a.names == tuple(ALL)
    assert len({x.name for x in a.axioms}) == len(a.axioms)
    assert a.by_name("sum_nest").condition.clauses


def test_digest_depends_on_content_not_layout(tmp_path: Path) -> None:
    src = (axioms_dir() / "eq.toml").read_text()
    (tmp_path / "eq.toml").write_text("# a new comment\n" + src)
    (tmp_path / "sub.toml").write_text((axioms_dir() / "sub.toml").read_text())
    assert load_axioms(["eq", "sub"], tmp_path).digest == load_axioms(["eq", "sub"]).digest
    (tmp_path / "eq.toml").write_text(src.replace('rhs = "add(y, x)"', 'rhs = "add(x, y)"'))
    assert load_axioms(["eq", "sub"], tmp_path).digest != load_axioms(["eq", "sub"]).digest


@pytest.mark.parametrize("ax", load_axioms(ALL).eq, ids=lambda a: a.name)
def test_axiom_against_float64(ax: object) -> None:
    from mirage_formal.formal.axioms import Axiom

    assert isinstance(ax, Axiom)
    r = check_axiom(ax, np.random.default_rng(abs(hash(ax.name)) % 2**32))
    if ax.sound:
        assert r.holds, f"{ax.name} is marked sound but fails on random tensors: {r.detail}"
    else:
        assert not r.holds, f"{ax.name} is marked unsound but holds on random tensors"


def test_unsound_axioms_are_listed() -> None:
    names = sorted(a.name for a in load_axioms(ALL).unsound())
    assert names == ["sum_div_factor", "sum_mul_factor"]
    for a in load_axioms(ALL).unsound():
        assert a.reason


GOOD_HEAD = '[set]\nkind = "eq"\ndescription = "t"\n\n'


@pytest.mark.parametrize("body,needle", [
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "exp(x"\nrhs = "x"\n', "lhs"),
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "exp(y)"\nrhs = "x"\n', "not declared"),
    ('[[axiom]]\nname = "a"\nvars = ["x", "z"]\nlhs = "exp(x)"\nrhs = "x"\n', "unused"),
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "exp(x)"\nrhs = "x"\nsound = false\n', "reason"),
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "exp(x)"\nrhs = "x"\nwhen = "i > 1"\n', "unknown keys"),
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nsizes = ["n"]\nlhs = "sum(n, x)"\nrhs = "x"\ncondition = "n >> 1"\n', "condition"),
    ('[[axiom]]\nname = "a"\nvars = ["x", "y"]\nlhs = "x"\nrhs = "y"\n', "rewrite"),
    ('[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "exp(x)"\nrhs = "x"\n\n[[axiom]]\nname = "a"\nvars = ["x"]\nlhs = "sqrt(x)"\nrhs = "x"\n', "twice"),
])
def test_malformed_file_names_file_line_reason(tmp_path: Path, body: str, needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(GOOD_HEAD + body)
    with pytest.raises(FormatError) as ei:
        load_axioms(["bad"], tmp_path)
    msg = str(ei.value)
    assert str(p) in msg and needle in msg
    assert f"{p}:5" in msg or f"{p}:11" in msg  # the line of the offending [[axiom]]


def test_toml_syntax_error_and_unknown_set(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[set\nkind = 1\n")
    with pytest.raises(FormatError, match="line"):
        load_axioms(["bad"], tmp_path)
    with pytest.raises(MirageError, match="available"):
        load_axioms(["nope"], tmp_path)


def test_researcher_adds_an_axiom(tmp_path: Path) -> None:
    """A new rule in a new file changes a decision, and is named in the explanation."""
    from mirage_formal import workloads
    from mirage_formal.formal.oracle import Oracle
    from mirage_formal.formal.term import parse_term

    for n in ("eq", "sub"):
        (tmp_path / f"{n}.toml").write_text((axioms_dir() / f"{n}.toml").read_text())
    prog = workloads.program("rmsnorm", h=256, n=128)
    cand = parse_term("pow_half(div(sum(256, mul(X, X)), 256))")
    assert not Oracle(prog, ["eq", "sub"], directory=tmp_path).decide_expr(cand).keep
    (tmp_path / "mine.toml").write_text(
        GOOD_HEAD + '[[axiom]]\nname = "sqrt_as_pow"\nvars = ["x"]\nlhs = "sqrt(x)"\n'
        'rhs = "pow_half(x)"\n')
    d = Oracle(prog, ["eq", "sub", "mine"], directory=tmp_path).decide_expr(cand)
    assert d.keep and "sqrt_as_pow" in d.axioms
