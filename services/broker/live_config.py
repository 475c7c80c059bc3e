"""A broker's configuration as ``relaymq admin get-broker-config`` shows it, and the keys
``update-broker-config`` may change while the broker runs.

Rules:
- Every key of a broker's three configs (broker, store, replication) is shown with its
  value and unit, by the RocketMQ name it was configured with.
- Only :data:`LIVE_KEYS` change at runtime: each is read from the config at every use (a
  send, a receive, a check), never copied into a timer or a buffer at start.  Any other key
  is refused, naming the file to change and saying it takes a restart.
- A live change is validated exactly as the file would be (``metadata.config.bind``: type,
  minimum, maximum, choices) and applied as a new frozen config; it lasts until the broker
  restarts (the file is never rewritten: the operator's file stays the one truth).
"""
from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, Mapping

from metadata.config import ConfigError, bind

LIVE_KEYS = frozenset({
    "autoCreateTopicEnable", "defaultTopicQueueNums", "transactionTimeOut", "transactionCheckMax", "maxDelayTimeMills",
    "timerBatchMax", "popInflightMaxPerQueue", "popScanMax", "maxReceiveBatchSize", "longPollingMaxMs",
    "reviveBatchMax", "internalPutRetries", "internalPutRetryBackoffMs",
})


class NotLive(Exception):
    """The key exists but only takes effect at a restart (or does not exist)."""


def _text(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_entries(*configs: Any) -> list[tuple[str, str, str, bool]]:
    """(key, value, unit, live) for every field of ``configs``, sorted by key."""
    entries = {}
    for config in configs:
        for field in dataclasses.fields(config):
            key = field.metadata.get("key")
            if key and key not in entries:
                entries[key] = (key, _text(getattr(config, field.name)), field.metadata.get("unit", ""), key in LIVE_KEYS)
    return [entries[key] for key in sorted(entries)]


def updated_config(config: Any, changes: Mapping[str, str], where: str) -> Any:
    """``config`` with ``changes`` (RocketMQ key -> text) applied; raises :class:`NotLive` for a
    key that cannot change at runtime and ``ConfigError`` for a bad value."""
    keys = {field.metadata.get("key"): field.name for field in dataclasses.fields(config) if field.metadata.get("key")}
    for key in changes:
        if key not in LIVE_KEYS:
            known = "exists but" if key in keys else "is not a broker key; if it is a store or replication key, it"
            raise NotLive(f"{key} {known} takes effect only at a restart: change it in {where}")
    current = {key: _text(getattr(config, name)) for key, name in keys.items()}
    try:
        return bind(type(config), {**current, **changes}, "update-broker-config")
    except ConfigError as exc:
        raise ConfigError(where, exc.key, exc.reason) from None
