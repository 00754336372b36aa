"""Shared fixtures: the real dumps and the reference tool's outputs copied into tests/data."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def case_dir(case: str) -> Path:
    return DATA / case


def reference_file(case: str, run: str, pattern: str = "*") -> Path:
    """The single output file of one reference run (ref/<run>/), e.g. ('stat_mix', 'compare_csv')."""
    files = sorted((DATA / case / "ref" / run).glob(pattern))
    assert len(files) == 1, f"expected one reference output in {case}/ref/{run}, found {files}"
    return files[0]


def read_csv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture
def data_dir() -> Path:
    return DATA
