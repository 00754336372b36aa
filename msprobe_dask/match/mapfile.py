"""Reading the user's mapping yaml files: one clear ``ConfigError`` naming the file per mistake."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from msprobe_dask.errors import ConfigError

_SHOWN = 5


def load_yaml(path: str | Path) -> Any:
    """The parsed document of a mapping file (``None`` for an empty file)."""
    import yaml

    path = Path(path)
    if path.is_dir():
        raise ConfigError(path, "is a folder, not a mapping file")
    if not path.is_file():
        raise ConfigError(path, "mapping file not found")
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(path, f"is not valid yaml{where}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, f"cannot be read: {exc}") from None


def load_name_map(path: str | Path, what: str) -> dict[str, str]:
    """A flat ``name: name`` yaml (data mapping, cell mapping). Empty file: empty map, with a warning."""
    doc = load_yaml(path)
    if doc is None:
        warn(f"{path}: empty {what} file; nothing is mapped")
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(path, f"a {what} file must be a yaml mapping of names, found a {_kind(doc)}")
    table: dict[str, str] = {}
    for key, value in doc.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(path, f"{what} entry {key!r}: {value!r} must map a name to a name")
        table[key] = value
    return table


def _kind(doc: Any) -> str:
    return "list" if isinstance(doc, list) else "string" if isinstance(doc, str) else type(doc).__name__


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def warn_unused(path: str | Path | None, what: str, names: list[str], where: str = "the target dump") -> None:
    """One warning for all the names of a mapping file that match nothing in the dumps."""
    if not names:
        return
    shown = ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
    warn(f"{path}: {len(names)} {what} name(s) not found in {where}, ignored: {shown}")
