"""Matching options against the reference's csv, cell for cell, on the real dumps in tests/data.

Every difference is one of ours and is asserted row by row:
- D7: MindSpore dumps carry no requires_grad; the reference then adds a Required_Grad error to every
  matched tensor row. We show N/A and do not judge it.
- D4: MindSpore ``Float32`` against PyTorch ``torch.float32`` is the same dtype. The reference flags
  every such row with a dtype error; we compare dtypes after normalising (``match.dtypes.same_dtype``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import case_dir, read_csv, reference_file

from msprobe_dask.cli import main
from msprobe_dask.judge.rules import MSG_DTYPE, MSG_REQUIRES_GRAD, judge_columns
from msprobe_dask.match.dtypes import same_dtype


def test_d4_judge_compares_normalised_dtypes() -> None:
    row = {
        "NPU Name": "Functional.x.0.forward.input.0",
        "Bench Name": "Functional.x.0.forward.input.0",
        "NPU Dtype": "Float32",
        "Bench Dtype": "torch.float32",
        "NPU Tensor Shape": "[1]",
        "Bench Tensor Shape": "[1]",
        "NPU Requires_grad": "N/A",
        "Bench Requires_grad": "N/A",
        "NPU max": 1.0,
        "NPU min": 1.0,
        "Bench max": 1.0,
        "Bench min": 1.0,
        "NormRelativeErr": "0",
    }
    _, messages = judge_columns({column: [cell] for column, cell in row.items()}, [1], "statistics")
    assert MSG_DTYPE not in json.loads(messages[0])


def run(case: str, out: Path, *extra: str, target: str = "target", golden: str = "golden") -> Path:
    base = case_dir(case)
    args = [a.replace("{case}", str(base)) for a in extra]
    assert (
        main(
            [
                "compare",
                "-q",
                "-tp",
                str(base / target / "dump.json"),
                "-gp",
                str(base / golden / "dump.json"),
                "-o",
                str(out),
                *args,
            ]
        )
        == 0
    )
    files = sorted(p for p in out.iterdir() if p.suffix == ".csv")
    assert len(files) == 1, files
    return files[0]


def _level(messages: list[str]) -> str:
    return "error" if any(m.startswith("error") for m in messages) else "warning" if messages else "pass"


def assert_same_but_d4_d7(ours: list[list[str]], ref: list[list[str]]) -> dict[str, int]:
    """Cell for cell, except the D7 and D4 messages (and the Result they change). Counts both."""
    header = ref[0]
    assert ours[0] == header
    assert len(ours) == len(ref)
    col = {name: header.index(name) for name in header}
    counts = {"D4": 0, "D7": 0}
    for a, b in zip(ours[1:], ref[1:]):
        expected = json.loads(b[col["Err_message"]])
        if MSG_REQUIRES_GRAD in expected:
            assert "N/A" in (b[col["NPU Requires_grad"]], b[col["Bench Requires_grad"]]), b[0]
            expected.remove(MSG_REQUIRES_GRAD)
            counts["D7"] += 1
        npu_dtype, bench_dtype = b[col["NPU Dtype"]], b[col["Bench Dtype"]]
        if MSG_DTYPE in expected and same_dtype(npu_dtype, bench_dtype):
            assert npu_dtype != bench_dtype  # a framework spelling difference, not a real one
            counts["D4"] += 1
            expected.remove(MSG_DTYPE)
        assert json.loads(a[col["Err_message"]]) == expected, b[0]
        assert a[col["Result"]] == (
            _level(expected) if expected != json.loads(b[col["Err_message"]]) else b[col["Result"]]
        ), b[0]
        skip = {col["Err_message"], col["Result"]}
        for i, (x, y) in enumerate(zip(a, b)):
            if i not in skip:
                assert x == y, f"{b[0]}, column {header[i]!r}: ours {x!r}, reference {y!r}"
    return counts


CROSS_FRAMEWORK_RUNS = [
    ("ms_vs_pt", "compare_am_csv", ["-am"]),
    ("ms_vs_pt", "compare_am_yaml_compat_csv", ["-am", "{case}/api_mapping_compat.yaml"]),
    ("ms_vs_pt", "compare_cm_csv", ["-cm"]),
    ("ms_vs_pt", "compare_cm_yaml_csv", ["-cm", "{case}/cell_mapping.yaml"]),
    ("ms_vs_pt", "compare_dm_csv", ["-dm", "{case}/data_mapping.yaml"]),
    ("ms_vs_pt", "compare_lm_csv", ["-lm", "{case}/layer_mapping.yaml"]),
    ("ms_vs_pt_tensor", "compare_am_csv", ["-am"]),
    ("ms_vs_pt_tensor", "compare_lm_csv", ["-lm", "{case}/layer_mapping.yaml"]),
]


@pytest.mark.parametrize(
    ("case", "ref_run", "extra"), CROSS_FRAMEWORK_RUNS, ids=[f"{c}-{r}" for c, r, _ in CROSS_FRAMEWORK_RUNS]
)
def test_cross_framework_equals_reference(case: str, ref_run: str, extra: list[str], tmp_path: Path) -> None:
    counts = assert_same_but_d4_d7(
        read_csv(run(case, tmp_path, *extra)), read_csv(reference_file(case, ref_run, "*.csv"))
    )
    assert counts["D7"] > 0 and counts["D4"] > 0


def test_documented_api_yaml_works_d3(tmp_path: Path) -> None:
    """D3: the documented ms_outputs/pt_outputs spelling crashes the reference; we read it like the
    ms_output/pt_output spelling, so the result is the reference's result for the compat yaml."""
    ours = read_csv(run("ms_vs_pt", tmp_path, "-am", "{case}/api_mapping.yaml"))
    assert_same_but_d4_d7(ours, read_csv(reference_file("ms_vs_pt", "compare_am_yaml_compat_csv", "*.csv")))
    names = {row[0]: row[1] for row in ours[1:]}
    assert names["Mint.matmul.0.forward.input.1"] == "Torch.matmul.0.forward.input.1"
    assert names["Mint.matmul.0.backward.output.1"] == "N/A"  # not listed in ms_outputs: [0]


def test_layer_mapping_writes_the_reference_data_mapping(tmp_path: Path) -> None:
    run("ms_vs_pt", tmp_path, "-lm", "{case}/layer_mapping.yaml")
    ours = sorted(tmp_path.glob("data_mapping_*.yaml"))
    assert len(ours) == 1
    assert ours[0].read_text() == reference_file("ms_vs_pt", "compare_lm_csv", "*.yaml").read_text()


def test_fuzzy_tensor_equals_reference(tmp_path: Path) -> None:
    ours = read_csv(run("fuzzy_tensor", tmp_path, "-fm"))
    ref = read_csv(reference_file("fuzzy_tensor", "compare_fm_csv", "*.csv"))
    assert ours == ref


def test_d4_dtype_spellings_are_one_dtype() -> None:
    assert same_dtype("Float32", "torch.float32")
    assert same_dtype("BFloat16", "torch.bfloat16")
    assert same_dtype("Int64", "torch.int64")
    assert same_dtype("Bool", "torch.bool")
    assert not same_dtype("Float16", "torch.float32")
    assert not same_dtype("Float32", "Float16")
    assert same_dtype("<class 'int'>", "<class 'int'>")
    assert not same_dtype("<class 'int'>", "<class 'float'>")


@pytest.mark.parametrize("case", ["ms_vs_pt", "ms_vs_pt_tensor"])
def test_cross_framework_xlsx_equals_reference_but_d4_d6_d7(case: str, tmp_path: Path) -> None:
    """The -am xlsx read back: every cell the reference's but the D4/D7 messages and Result, and D6's
    appended reasons. A MindSpore side has no requires_grad (D7: not judged), so no row is filled for
    a requires_grad difference: the xlsx fills what the csv judges."""
    import openpyxl

    from msprobe_dask.judge.highlight import REASON_GRAD

    base = case_dir(case)
    args = ["compare", "-q", "--xlsx", "-am", "-o", str(tmp_path)]
    assert (
        main([*args, "-tp", str(base / "target" / "dump.json"), "-gp", str(base / "golden" / "dump.json")])
        == 0
    )
    (ours,) = tmp_path.glob("*.xlsx")

    def rows(path: Path) -> list[list[str]]:
        sheet = openpyxl.load_workbook(path).active
        return [["" if c is None else str(c) for c in row] for row in sheet.iter_rows(values_only=True)]

    table, ref = rows(ours), rows(reference_file(case, "compare_am_xlsx", "*.xlsx"))
    message = table[0].index("Err_message")
    reasons = [m for row in table[1:] for m in json.loads(row[message]) if m.startswith("highlight ")]
    assert REASON_GRAD not in reasons
    for row in table[1:]:
        row[message] = json.dumps([m for m in json.loads(row[message]) if not m.startswith("highlight ")])
    counts = assert_same_but_d4_d7(table, ref)
    assert counts["D7"] > 0 and counts["D4"] > 0
