"""Consumer (subscription) group configuration and ``config/subscriptionGroup.json``.

Only the fields RelayMQ acts on are first-class: ``consumeMessageOrderly`` (FIFO delivery),
``retryMaxTimes`` (max delivery attempts = retryMaxTimes + 1) and ``consumeEnable``.  The
document keeps RocketMQ's field names so that files move between the two.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from metadata import fastjson
from metadata.data_version import DataVersion, DataVersionFormatError
from metadata.names import is_valid_group_name

MAX_RETRY_TIMES = 64


class GroupConfigError(ValueError):
    """A consumer group configuration is invalid; the message says why."""


@dataclass(frozen=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_message_orderly: bool = False
    retry_max_times: int = 16
    consume_enable: bool = True

    def validate(self) -> "SubscriptionGroupConfig":
        if not is_valid_group_name(self.group_name):
            raise GroupConfigError(f"group name {self.group_name!r} must match [%|a-zA-Z0-9_-]+ and be at most 255 characters")
        if not 0 <= self.retry_max_times <= MAX_RETRY_TIMES:
            raise GroupConfigError(f"group {self.group_name}: retryMaxTimes = {self.retry_max_times} must be between 0 and {MAX_RETRY_TIMES}")
        return self

    @property
    def max_delivery_attempts(self) -> int:
        return self.retry_max_times + 1

    def with_changes(self, **changes: Any) -> "SubscriptionGroupConfig":
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": {},
            "brokerId": 0,
            "consumeBroadcastEnable": True,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": True,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": 15,
            "groupName": self.group_name,
            "groupSysFlag": 0,
            "notifyConsumerIdsChangedEnable": True,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": 1,
            "whichBrokerWhenConsumeSlowly": 1,
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> "SubscriptionGroupConfig":
        if not isinstance(value, Mapping):
            raise GroupConfigError(f"{where}: expected an object")
        try:
            config = cls(
                group_name=value["groupName"],
                consume_message_orderly=bool(value.get("consumeMessageOrderly", False)),
                retry_max_times=int(value.get("retryMaxTimes", 16)),
                consume_enable=bool(value.get("consumeEnable", True)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise GroupConfigError(f"{where}: {exc!r}") from None
        return config.validate()


_ENTRY_TEXTS = fastjson.EntryTexts(depth=2)  # {"subscriptionGroupTable": {name: entry}}


@dataclass(frozen=True)
class SubscriptionGroupTable:
    data_version: DataVersion = DataVersion()
    groups: Mapping[str, SubscriptionGroupConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", MappingProxyType(dict(self.groups)))

    def with_group(self, config: SubscriptionGroupConfig, data_version: DataVersion) -> "SubscriptionGroupTable":
        return SubscriptionGroupTable(data_version, {**self.groups, config.group_name: config})

    def without_group(self, name: str, data_version: DataVersion) -> "SubscriptionGroupTable":
        return SubscriptionGroupTable(data_version, {k: v for k, v in self.groups.items() if k != name})

    def to_document(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "forbiddenTable": {},
            "subscriptionGroupTable": {n: g.to_json() for n, g in self.groups.items()},
        }

    def file_document(self) -> dict[str, Any]:
        """:meth:`to_document` for ``fastjson.dumps``, each group's entry already written (kept
        per config object: groups are created by their first receive, and each rewrote the file)."""
        return {"dataVersion": self.data_version.to_json(), "forbiddenTable": {},
                "subscriptionGroupTable": {n: _ENTRY_TEXTS.of(g, SubscriptionGroupConfig.to_json)
                                           for n, g in self.groups.items()}}

    @classmethod
    def from_document(cls, document: Any, where: str = "subscriptionGroup.json") -> "SubscriptionGroupTable":
        if not isinstance(document, Mapping):
            raise GroupConfigError(f"{where}: top level is not an object")
        try:
            version = DataVersion.from_json(document.get("dataVersion", {}), f"{where}: dataVersion")
        except DataVersionFormatError as exc:
            raise GroupConfigError(str(exc)) from None
        table = document.get("subscriptionGroupTable") or {}
        if not isinstance(table, Mapping):
            raise GroupConfigError(f"{where}: subscriptionGroupTable is not an object")
        groups = {n: SubscriptionGroupConfig.from_json(v, f"{where}: subscriptionGroupTable[{n!r}]") for n, v in table.items()}
        return cls(version, groups)
