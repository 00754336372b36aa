"""Reading the user's mapping yaml files: one clear ``ConfigError`` naming the file per mistake."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

from msprobe_dask.dump.confine import check_regular
from msprobe_dask.errors import ConfigError

_SHOWN = 5


def load_yaml(path: str | Path, what: str = "mapping file") -> Any:
    """The parsed document of a mapping file (``None`` for an empty file). Aliases (``*name``) are
    refused: no mapping needs them, and a few nested ones expand to billions of nodes."""
    import yaml

    path = Path(path)
    if path.is_dir():
        raise ConfigError(path, f"is a folder, not a {what}")
    if not os.path.lexists(path):
        raise ConfigError(path, f"{what} not found")
    check_regular(path, ConfigError)
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_no_alias_loader())  # noqa: S506 - a SafeLoader
    except _AliasError as exc:
        raise ConfigError(path, str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(path, f"is not valid yaml{where}") from None
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(path, f"cannot be read: {exc}") from None


@functools.lru_cache(maxsize=1)
def _no_alias_loader() -> type:
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _AliasError(
                    f"uses the yaml alias *{event.anchor} at line {event.start_mark.line + 1}: aliases "
                    "are not accepted (a few nested ones expand to billions of entries)"
                )
            return super().compose_node(parent, index)

    return NoAliasLoader


class _AliasError(Exception):
    pass


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
