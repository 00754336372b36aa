"""§7.6's text rule as written, the oracle of the export tests."""

from __future__ import annotations

import re


def text_by_the_rule(s: str) -> str:
    """Quotes dropped, None -> null, a decimal with more than 6 decimals rounded to 6."""
    s = s.replace("'", "").replace("None", "null")
    m = re.match(r"^\d{1,20}\.(\d{1,20})%?$", s)
    if m and len(m.group(1)) > 6:
        return f"{float(s[:-1]):.6f}%" if s.endswith("%") else f"{float(s):.6f}"
    return s
