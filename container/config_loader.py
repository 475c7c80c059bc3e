"""Reading configuration files into flat mappings of RocketMQ keys.

Two formats are accepted, chosen by extension:

- ``.properties`` (RocketMQ's own): ``key=value`` or ``key: value`` lines, ``#`` and ``!``
  comments, trailing-backslash continuation.  Values stay strings; the binder converts.
- ``.toml``: top-level keys are the component's keys; ``[[broker]]`` tables (a container's
  inline brokers) come back as a list of mappings under ``"broker"``.

Errors name the file and, where there is one, the line: a user never sees a traceback.
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from metadata.config import ConfigError

MAX_CONFIG_BYTES = 1 << 20


def _read_text(path: Path) -> str:
    where = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(where, None, "file not found") from None
    except IsADirectoryError:
        raise ConfigError(where, None, "is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(where, None, f"cannot be read ({exc.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(where, None, f"is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(where, None, f"is not UTF-8 text (byte {exc.start})") from None


def parse_properties(text: str, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    pending = ""
    start_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not pending else raw.lstrip()
        if not pending:
            start_line = number
            if not line or line.startswith(("#", "!")):
                continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        key, value = _split_property(line, f"{where}:{start_line}")
        values[key] = value
    if pending:
        raise ConfigError(f"{where}:{start_line}", None, "line continuation at end of file")
    return values


def _split_property(line: str, where: str) -> tuple[str, str]:
    positions = [i for i in (line.find("="), line.find(":")) if i >= 0]
    if not positions:
        raise ConfigError(where, None, f"expected key=value, got {line!r}")
    cut = min(positions)
    key, value = line[:cut].strip(), line[cut + 1:].strip()
    if not key:
        raise ConfigError(where, None, "empty key")
    return key, value


def load_config_file(path: Path | str) -> dict[str, Any]:
    """The file's keys and values; raises :class:`ConfigError` naming the file."""
    path = Path(path)
    text = _read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(str(path), None, f"invalid TOML: {exc}") from None
    if suffix in (".properties", ".conf", ".cfg", ""):
        return parse_properties(text, str(path))
    raise ConfigError(str(path), None, f"unknown config format {suffix!r} (use .properties or .toml)")
