"""Each loader defect reproduced in issue 14 now gives a package error (exit 2 on the command
line) whose message is in the user's terms: Mirage JSON field holes, deep nesting in every
command, duplicate and non-finite text-form definitions, wrong-arity axioms."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mirage_formal.cli import main
from mirage_formal.errors import FormatError
from mirage_formal.formal.axioms import read_axiom_file
from mirage_formal.ir.mirage import import_mugraph
from mirage_formal.ir.serialize import load_any
from mirage_formal.ir.text import parse_text

DATA = Path(__file__).resolve().parents[1] / "data"


def mirage() -> list[dict[str, Any]]:
    return json.loads((DATA / "mirage_rmsnorm.json").read_text())[0]  # type: ignore[no-any-return]


def test_seed_imports() -> None:
    g = import_mugraph(mirage(), ["X", "W"])
    assert len(g.kernels) == 1


def _set(path: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    g = copy.deepcopy(mirage())
    d: Any = g
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return g


@pytest.mark.parametrize("path, value, message", [
    ((2, "bgraph", "grid_dim", "z"), 0, r"grid_dim.z = 0 is out of range"),
    ((2, "op_type"), 7, r"op_type must be a string .* not the number 7"),
    ((2, "bgraph", "block_dim"), None, r"block_dim must be a JSON object, not null"),
    ((2, "output_tensors"), [], r"output_tensors is empty"),
    ((0, "output_tensors"), [], r"output_tensors is empty"),
    ((2, "bgraph", "operators", 0, "forloop_dim"), 10**30, r"forloop_dim = 10{30} is out of range"),
    ((2, "bgraph", "forloop_range"), 2.5, r"forloop_range must be an integer, not the number 2.5"),
    ((0, "output_tensors", 0, "dim"), 5, r"dim must be a JSON array, not the number 5"),
    ((2, "input_tensors", 0), 3, r"input_tensors\[0\] must be a JSON object"),
    ((0, "output_tensors", 0, "data_type"), "f16", r"data_type 'f16' is not one we read"),
])
def test_mirage_field_holes(path: tuple[Any, ...], value: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        import_mugraph(_set(path, value), ["X", "W"])


def test_mirage_infinite_number_in_the_file(tmp_path: Path) -> None:
    p = tmp_path / "inf.json"
    p.write_text(json.dumps([_set((2, "bgraph", "operators", 0, "forloop_dim"), 12345)])
                 .replace("12345", "1e400"))
    with pytest.raises(FormatError, match="1e400 is too large for a 64-bit float"):
        load_any(p)
    p.write_text(p.read_text().replace("1e400", "Infinity"))
    with pytest.raises(FormatError, match="Infinity is not allowed"):
        load_any(p)


def test_no_python_internals_in_mirage_messages() -> None:
    for path, value in [((2, "bgraph"), 3), ((2, "bgraph", "operators"), {"a": 1}),
                        ((2, "bgraph", "operators", 1), []), ((1,), "x")]:
        with pytest.raises(FormatError) as e:
            import_mugraph(_set(path, value), ["X", "W"])
        assert "object is not" not in str(e.value) and "Error" not in str(e.value)


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000)
    return p


@pytest.mark.parametrize("argv", [
    ["show", "{f}"], ["codegen", "{f}"], ["explain", "{f}"], ["verify", "{f}", "{f}"],
    ["verify", "rmsnorm", "{f}"], ["optimize", "{f}", "--quiet"],
])
def test_deep_nesting_in_every_command(argv: list[str], deep: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.replace("{f}", str(deep)) for a in argv]
    if args[0] == "optimize":
        args += ["--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert "nested 100000 levels deep" in capsys.readouterr().err


TEXT = """ugraph {
  %0 = input() {name='X'} : f16[4, 8]
  %1 = exp(%0) : f16[4, 8]
  %1 = neg(%0) : f16[4, 8]
  return %1
}
"""


def test_text_duplicate_definition_refused() -> None:
    with pytest.raises(FormatError, match="%1 is defined twice"):
        parse_text(TEXT)


def test_text_non_finite_scalar_refused() -> None:
    t = TEXT.replace("  %1 = neg(%0) : f16[4, 8]\n", "").replace(
        "%1 = exp(%0)", "%1 = mul_scalar(%0) {scalar=1e400}")
    with pytest.raises(FormatError, match="scalar is not a finite number"):
        parse_text(t)
    with pytest.raises(FormatError, match="not a finite number"):
        parse_text(t.replace("1e400", "-1e999"))


def test_text_unclosed_kernel_and_bad_get() -> None:
    t = "ugraph {\n  %0 = input() {name='X'} : f16[4, 8]\n  %1 = kernel(%0) {grid=(1, 1, 1), threads=32, forloop=1} {\n}"
    with pytest.raises(FormatError, match="not closed"):
        parse_text(t)
    with pytest.raises(FormatError, match="get takes one kernel"):
        parse_text("ugraph {\n  %0 = input() {name='X'} : f16[4, 8]\n  %1 = get(%0) {index=0} : f16[4, 8]\n"
                   "  return %1\n}")


AXIOM = '[set]\nkind = "eq"\ndescription = "t"\n\n[[axiom]]\nname = "a"\nvars = ["x", "y"]\n'


@pytest.mark.parametrize("lhs, rhs, message", [
    ("add(x)", "x", r"add takes 2 arguments, but add\(x\) gives it 1"),
    ("exp(x, y)", "x", "exp takes 1 argument,"),
    ("f(x, y)", "f(x)", r"f takes 2 arguments, but f\(x\) gives it 1"),
])
def test_axiom_wrong_arity(tmp_path: Path, lhs: str, rhs: str, message: str) -> None:
    p = tmp_path / "mine.toml"
    p.write_text(AXIOM + f'lhs = "{lhs}"\nrhs = "{rhs}"\n')
    with pytest.raises(FormatError, match=message):
        read_axiom_file(p)


def test_axiom_file_limits(tmp_path: Path) -> None:
    p = tmp_path / "deep.toml"
    p.write_text("a = " + "[" * 100_000)
    with pytest.raises(FormatError, match="nested 100000 levels deep"):
        read_axiom_file(p)
    p.write_text(AXIOM + 'lhs = "add(x, y)"\nrhs = "add(y, x)"\nnote = 1e400\n')
    with pytest.raises(FormatError, match="finite"):
        read_axiom_file(p)


def test_a_boolean_version_is_refused(tmp_path: Path) -> None:
    """JSON's ``true`` equals 1 in Python: a μGraph file or a search checkpoint whose version is
    ``true`` is refused, not read as version 1 (found by tests/fuzz, s29)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from file_fuzz import seed_checkpoint, seed_our_json

    from mirage_formal.checkpoints import check_checkpoint
    from mirage_formal.errors import MirageError

    doc = json.loads(seed_our_json())
    ug = tmp_path / "ugraphs.json"
    ug.write_text(json.dumps(doc))
    load_any(ug)  # the seed itself loads
    doc["version"] = True
    ug.write_text(json.dumps(doc))
    with pytest.raises(MirageError, match="unsupported version True"):
        load_any(ug)
    ck = tmp_path / "checkpoint.json"
    doc = json.loads(seed_checkpoint())
    ck.write_text(json.dumps(doc))
    check_checkpoint(ck)
    doc["version"] = True
    ck.write_text(json.dumps(doc))
    with pytest.raises(MirageError, match="unknown version"):
        check_checkpoint(ck)
