"""Binding RocketMQ-named config keys to frozen, validated dataclasses.

Every component declares its configuration as a frozen dataclass whose fields carry
``config_field(key, default, unit=..., doc=..., minimum=..., maximum=..., choices=...)``
metadata; :func:`bind` builds one from a flat mapping of key -> raw value (strings from a
``.properties`` file, typed values from TOML), converting and checking each value and
raising :class:`ConfigError` that names the source, the key and the reason.  Unknown keys
are reported by :func:`unknown_keys` so the loader can refuse them with the same clarity.

The field declarations are the one documented place for every key's unit and default
(``docs/configuration.md`` is generated from them by :func:`describe`).
"""
from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar, get_type_hints

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range."""

    def __init__(self, where: str, key: str | None, reason: str):
        self.where, self.key, self.reason = where, key, reason
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


def config_field(key: str, default: Any = dataclasses.MISSING, *, unit: str = "", doc: str = "",
                 minimum: float | None = None, maximum: float | None = None,
                 choices: Iterable[Any] | None = None) -> Any:
    meta = {"key": key, "unit": unit, "doc": doc, "minimum": minimum, "maximum": maximum,
            "choices": tuple(choices) if choices is not None else None}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed in frozen configs")
    return dataclasses.field(default=default, metadata=meta)


def _convert(raw: Any, kind: Any, where: str, key: str) -> Any:
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(raw.strip() if isinstance(raw, str) else raw)
        except ValueError:
            allowed = ", ".join(str(member.value) for member in kind)
            raise ConfigError(where, key, f"{raw!r} is not one of {allowed}") from None
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ConfigError(where, key, f"{raw!r} is not a boolean (true or false)")
    if kind is int:
        if isinstance(raw, bool):
            raise ConfigError(where, key, f"{raw!r} is not an integer")
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(where, key, f"{raw!r} is not an integer") from None
    if kind is float:
        if isinstance(raw, bool):
            raise ConfigError(where, key, f"{raw!r} is not a number")
        try:
            return float(str(raw).strip()) if not isinstance(raw, (int, float)) else float(raw)
        except ValueError:
            raise ConfigError(where, key, f"{raw!r} is not a number") from None
    if kind is Path:
        if not isinstance(raw, str) or not raw.strip():
            raise ConfigError(where, key, f"{raw!r} is not a path")
        return Path(raw.strip()).expanduser()
    if kind is str:
        if isinstance(raw, (dict, list)):
            raise ConfigError(where, key, f"expected a string, got {type(raw).__name__}")
        return str(raw).strip() if not isinstance(raw, str) else raw.strip()
    raise TypeError(f"unsupported config field type {kind!r} for {key}")


def _check_range(value: Any, meta: Mapping[str, Any], where: str, key: str) -> None:
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise ConfigError(where, key, f"{value} is below the minimum {meta['minimum']}")
    if meta["maximum"] is not None and value > meta["maximum"]:
        raise ConfigError(where, key, f"{value} is above the maximum {meta['maximum']}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise ConfigError(where, key, f"{value!r} is not one of {', '.join(map(str, meta['choices']))}")


def keys_of(cls: type) -> dict[str, dataclasses.Field]:
    return {f.metadata["key"]: f for f in dataclasses.fields(cls) if "key" in f.metadata}


def bind(cls: type[T], values: Mapping[str, Any], where: str, **overrides: Any) -> T:
    """Build ``cls`` from ``values`` (keys are RocketMQ names); ``overrides`` are field names."""
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, field in keys_of(cls).items():
        if field.name in overrides:
            continue
        if key in values:
            value = _convert(values[key], hints[field.name], where, key)
            _check_range(value, field.metadata, where, key)
            kwargs[field.name] = value
        elif field.default is dataclasses.MISSING:
            raise ConfigError(where, key, "is required")
    kwargs.update(overrides)
    return cls(**kwargs)


def unknown_keys(values: Mapping[str, Any], *classes: type) -> list[str]:
    known: set[str] = set()
    for cls in classes:
        known.update(keys_of(cls))
    return sorted(key for key in values if key not in known)


def describe(cls: type) -> list[tuple[str, str, str, str]]:
    """(key, default, unit, doc) for every key of ``cls``, for the configuration reference."""
    rows = []
    for key, field in keys_of(cls).items():
        default = "required" if field.default is dataclasses.MISSING else field.default
        if isinstance(default, Enum):
            default = default.value
        rows.append((key, str(default), field.metadata["unit"], field.metadata["doc"]))
    return rows
