"""The fuzz suite: hypothesis mutates every file format the package reads (our JSON, Mirage's
JSON, the text form, axiom TOML, preset TOML, checkpoints) and the oracle's SQLite cache.
Only package exceptions, never a hang, never an invalid file accepted (rules in
``tests/file_fuzz.py``). ``benchmarks/fuzz_files.py`` runs the same with many more examples."""

from __future__ import annotations

import pytest
from file_fuzz import TARGETS, Mutant, cache_damage, cache_round, classify
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seed_is_accepted(name: str) -> None:
    t = TARGETS[name]
    assert classify(t, Mutant(t.seed())) == "accepted"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutants_are_refused_cleanly_or_valid(name: str) -> None:
    t = TARGETS[name]
    seed = t.seed()

    @given(st.data())
    def run(data: st.DataObject) -> None:
        classify(t, data.draw(t.mutants(seed)))

    run()


@given(cache_damage())
def test_damaged_oracle_cache_reads_as_miss_or_original(damage: list[tuple[str, int, object]]) -> None:
    assert cache_round(damage) in ("intact", "dropped", "refused")
