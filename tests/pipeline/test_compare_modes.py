"""msprobe compare's ``-m/--mode`` and its flags for other inputs (pipeline/compare_modes.py): every flag of
msprobe's ``compare -h`` is read; ``-m auto`` runs as without it (the reference's csv), the others are
refused in one line, exit 2, nothing written.

The reference's answers (26.2.0, run on tests/data/L1_only by hand, 2026-12-05; never run here):
``-m auto`` writes the same csv as no ``-m``; ``-m offline_data`` runs CANN's msaccucmp, which finds no op
data file in a dump.json folder ("No valid dump files", exit 0, an empty output folder); ``-m torchair``,
``-m offline_model``, ``-m atb`` fail for want of the CANN toolkit or of their inputs (exit 1, a
traceback); ``--consistent_check`` wants ``proc*`` folders (exit 1, a traceback); ``-fr``, ``-qfr``,
``-cfr``, ``--input_data``, ``--input_shape``, ``--output_size``, ``--dym_shape_range``, ``-ofs`` are
"Invalid argument ... for mode 'auto'" (exit 1); ``--backend`` and ``--config`` are ignored in mode auto
(the csv of a run without them): refused here (README D36).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_csv, reference_file
from test_compare_csv_reference import assert_same_cells, run_compare

from msprobe_dask.cli import main
from msprobe_dask.pipeline.compare_modes import MODES, OTHER_INPUT_FLAGS, REFUSED

# a value msprobe takes for a refused flag (a file's path: x.json); the refusal names a choice, not a path
CHOICE_GIVEN = {"-ofs": ["False"], "--backend": ["fsdp"], "--consistent_check": []}


@pytest.mark.parametrize("mode", [["-m", "auto"], ["--mode", "auto"], ["--mode=auto"]], ids=" ".join)
def test_mode_auto_is_the_reference_csv(mode: list[str], tmp_path: Path) -> None:
    ours = run_compare("L1_only", tmp_path / "auto", *mode)
    assert ours.read_bytes() == run_compare("L1_only", tmp_path / "default").read_bytes()
    assert_same_cells(read_csv(ours), read_csv(reference_file("L1_only", "compare_csv")))


REFUSED_CASES = [(flag, mode) for flag in ("-m", "--mode") for mode in MODES[1:]] + [
    (flag, *CHOICE_GIVEN.get(flags[0], ["x.json"])) for flags, _, _ in OTHER_INPUT_FLAGS for flag in flags
]


@pytest.mark.parametrize("given", REFUSED_CASES, ids=" ".join)
def test_other_inputs_are_refused_in_one_line(
    given: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    target = tmp_path / "absent"  # refused before the dumps are looked at
    assert main(["compare", "-tp", str(target), "-gp", str(target), "-o", str(out), *given]) == 2
    captured = capsys.readouterr()
    named = given[0] if given[-1] == "x.json" else " ".join(given)
    assert captured.err == f"msprobe-dask: error: {named}: {REFUSED}; for this use msprobe compare {named}\n"
    assert captured.out == "" and not out.exists()


def test_a_mode_msprobe_does_not_have_is_argparse_s_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "-tp", "a", "-gp", "b", "-m", "bogus"])
    assert exit_info.value.code == 2
    assert "argument -m/--mode: invalid choice: 'bogus'" in capsys.readouterr().err
