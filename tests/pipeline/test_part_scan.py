"""A part's rows (part_scan.RowPart) travel between processes as marshal bytes, zlib-compressed for a
big rank only, and come back as the same rows."""

from __future__ import annotations

import marshal
import pickle
import zlib

import pytest
from conftest import case_dir

from msprobe_dask.dump.source import DumpSource
from msprobe_dask.pipeline import part_scan
from msprobe_dask.pipeline.part_scan import parse_part, rank_bytes, rows_zlib, scan_side


def _sources() -> tuple[DumpSource, DumpSource]:
    return tuple(DumpSource(case_dir("stat_mix") / side / "dump.json") for side in ("target", "golden"))  # type: ignore[return-value]


@pytest.mark.parametrize("zlib_packed", [False, True], ids=["marshal", "zlib"])
def test_rows_come_back_the_same_through_a_pickle(zlib_packed: bool) -> None:
    src, _ = _sources()
    scan, spans = scan_side(src, 1)
    part, _ = parse_part(scan, spans, 0, False, zlib_packed)
    rows = part.rows
    assert rows
    packed = pickle.loads(pickle.dumps(part)).packed
    decoded = marshal.loads(zlib.decompress(packed) if zlib_packed else packed)
    assert repr(decoded) == repr(list(map(tuple, rows)))  # (a NaN statistic is not equal to itself)
    assert repr(pickle.loads(pickle.dumps(part)).rows) == repr(rows)


def test_a_rank_from_the_threshold_sends_its_rows_compressed(monkeypatch: pytest.MonkeyPatch) -> None:
    npu, bench = _sources()
    size = rank_bytes(npu, bench)
    assert size == npu.dump_json.stat().st_size + bench.dump_json.stat().st_size
    monkeypatch.setattr(part_scan, "ROWS_ZLIB_FROM_BYTES", size)
    assert rows_zlib(npu, bench)
    monkeypatch.setattr(part_scan, "ROWS_ZLIB_FROM_BYTES", size + 1)
    assert not rows_zlib(npu, bench)
