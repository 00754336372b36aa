"""One line of a stack for a summary: the first frame in the user's code, not in a library."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

LIBRARY_MARKS = ("site-packages", "dist-packages", "/lib/python", "multiprocessing")


def stack_frames(cell: Any) -> list[str]:
    """The frames of an NPU_Stack_Info cell (the text of a Python list) or of a list; [] for N/A."""
    if isinstance(cell, (list, tuple)):
        return [str(frame) for frame in cell]
    return list(_frames_of_text(str(cell or "").strip()))


@lru_cache(maxsize=4096)
def _frames_of_text(text: str) -> tuple[str, ...]:
    """(A stack is shared by many entries: read once per text.)"""
    if not text.startswith("["):
        return ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return ()
    return tuple(str(frame) for frame in value) if isinstance(value, list) else ()


def user_frame(frames: Sequence[str]) -> str:
    """The first frame outside installed libraries (else the first), on one line; "" without frames."""
    if not frames:
        return ""
    frame = next((f for f in frames if not any(mark in f for mark in LIBRARY_MARKS)), frames[0])
    return " ".join(frame.replace("\\n", " ").split())
