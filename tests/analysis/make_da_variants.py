"""Regenerate multirank/ref/da_variants/ with the reference tool (not a test; run by hand):

/work/venv/bin/python tests/analysis/make_da_variants.py /work/oracle/bin/msprobe
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from variants import VARIANTS, build_variant

CASE = Path(__file__).resolve().parents[1] / "data" / "multirank"


def main(msprobe: str) -> None:
    out_root = CASE / "ref" / "da_variants"
    out_root.mkdir(exist_ok=True)
    lines = [
        "# first-diff variants of multirank/step0 (see tests/analysis/variants.py), made with",
        f"# {msprobe} compare -tp <variant target> -gp <variant golden> -da -o <out>",
        "# (the variant golden is multirank/golden/step0 unless variants.DROPPED names the variant)",
        "",
    ]
    for name in VARIANTS:
        with tempfile.TemporaryDirectory() as tmp:
            target, golden = build_variant(CASE, name, Path(tmp))
            out = Path(tmp) / "out"
            command = [msprobe, "compare", "-tp", str(target), "-gp", str(golden), "-da", "-o", str(out)]
            proc = subprocess.run(command, capture_output=True, text=True)
            dest = out_root / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            found = sorted(out.glob("diff_analyze_*.json"))
            for f in found:
                shutil.copy(f, dest / "diff_analyze.json")
            lines.append(f"[{name}] rc={proc.returncode} diff_analyze={'yes' if found else 'no'}")
            if "Cannot find any diff node" in proc.stdout + proc.stderr:
                lines.append("  log: Cannot find any diff node, no need to generate analyze file.")
    (out_root / "commands.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
