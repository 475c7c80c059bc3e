"""Topic configuration and the ``config/topics.json`` document.

Format (reference section 7)::

    {"dataVersion":{...},"topicConfigTable":{name:{"attributes":{},"order":false,"perm":6,
      "readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":name,"topicSysFlag":0,
      "writeQueueNums":8}}}

RelayMQ keeps the message type in ``attributes["+message.type"]`` as RocketMQ 5 does
(``NORMAL``, ``FIFO``, ``DELAY``, ``TRANSACTION`` or ``MIXED``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from metadata import fastjson
from metadata.data_version import DataVersion, DataVersionFormatError
from metadata.message import MessageType
from metadata.names import is_valid_topic_name

PERM_READ = 4
PERM_WRITE = 2
PERM_READ_WRITE = PERM_READ | PERM_WRITE
MESSAGE_TYPE_ATTRIBUTE = "+message.type"
MAX_QUEUE_NUMS = 1024
TOPIC_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


_ENTRY_TEXTS = fastjson.EntryTexts(depth=2)  # {"topicConfigTable": {name: entry}}


_ACCEPTED: dict[str, tuple[MessageType, ...]] = {"MIXED": tuple(MessageType), **{t.value: (t,) for t in MessageType}}


class TopicConfigError(ValueError):
    """A topic configuration (from a file or a request) is invalid; the message says why."""


@dataclass(frozen=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ_WRITE
    message_type: str = "NORMAL"
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    def validate(self) -> "TopicConfig":
        if not is_valid_topic_name(self.topic_name):
            raise TopicConfigError(f"topic name {self.topic_name!r} must match [%|a-zA-Z0-9_-]+ and be at most 127 characters")
        for name, value in (("readQueueNums", self.read_queue_nums), ("writeQueueNums", self.write_queue_nums)):
            if not 1 <= value <= MAX_QUEUE_NUMS:
                raise TopicConfigError(f"topic {self.topic_name}: {name} = {value} must be between 1 and {MAX_QUEUE_NUMS}")
        if self.perm not in (PERM_READ, PERM_WRITE, PERM_READ_WRITE, 0):
            raise TopicConfigError(f"topic {self.topic_name}: perm = {self.perm} must be 0, 2, 4 or 6")
        if self.message_type not in TOPIC_TYPES:
            raise TopicConfigError(f"topic {self.topic_name}: message type {self.message_type!r} must be one of {', '.join(TOPIC_TYPES)}")
        return self

    @property
    def queue_nums(self) -> int:
        return max(self.read_queue_nums, self.write_queue_nums)

    def accepts(self) -> tuple[MessageType, ...]:
        accepted = _ACCEPTED.get(self.message_type)  # every send asks: an Enum call is a Python call
        return accepted if accepted is not None else (MessageType(self.message_type),)

    def with_changes(self, **changes: Any) -> "TopicConfig":
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        attributes = dict(self.attributes)
        attributes[MESSAGE_TYPE_ATTRIBUTE] = self.message_type
        return {
            "attributes": attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": "SINGLE_TAG",
            "topicName": self.topic_name,
            "topicSysFlag": 0,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> "TopicConfig":
        if not isinstance(value, Mapping):
            raise TopicConfigError(f"{where}: expected an object")
        attributes = value.get("attributes") or {}
        if not isinstance(attributes, Mapping):
            raise TopicConfigError(f"{where}.attributes: expected an object")
        try:
            config = cls(
                topic_name=value["topicName"],
                read_queue_nums=int(value.get("readQueueNums", 8)),
                write_queue_nums=int(value.get("writeQueueNums", 8)),
                perm=int(value.get("perm", PERM_READ_WRITE)),
                message_type=str(attributes.get(MESSAGE_TYPE_ATTRIBUTE, "FIFO" if value.get("order") else "NORMAL")),
                order=bool(value.get("order", False)),
                attributes={str(k): str(v) for k, v in attributes.items() if k != MESSAGE_TYPE_ATTRIBUTE},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TopicConfigError(f"{where}: {exc!r}") from None
        return config.validate()


@dataclass(frozen=True)
class TopicTable:
    data_version: DataVersion = DataVersion()
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", MappingProxyType(dict(self.topics)))

    def with_topic(self, config: TopicConfig, data_version: DataVersion) -> "TopicTable":
        return TopicTable(data_version, {**self.topics, config.topic_name: config})

    def without_topic(self, name: str, data_version: DataVersion) -> "TopicTable":
        return TopicTable(data_version, {k: v for k, v in self.topics.items() if k != name})

    def to_document(self) -> dict[str, Any]:
        return {"dataVersion": self.data_version.to_json(), "topicConfigTable": {n: c.to_json() for n, c in self.topics.items()}}

    def file_document(self) -> dict[str, Any]:
        """:meth:`to_document` for ``fastjson.dumps``, each topic's entry already written (kept per
        config object: a changed table shares every other config with the one before it)."""
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {n: _ENTRY_TEXTS.of(c, TopicConfig.to_json) for n, c in self.topics.items()}}

    @classmethod
    def from_document(cls, document: Any, where: str = "topics.json") -> "TopicTable":
        if not isinstance(document, Mapping):
            raise TopicConfigError(f"{where}: top level is not an object")
        try:
            version = DataVersion.from_json(document.get("dataVersion", {}), f"{where}: dataVersion")
        except DataVersionFormatError as exc:
            raise TopicConfigError(str(exc)) from None
        table = document.get("topicConfigTable") or {}
        if not isinstance(table, Mapping):
            raise TopicConfigError(f"{where}: topicConfigTable is not an object")
        topics = {name: TopicConfig.from_json(value, f"{where}: topicConfigTable[{name!r}]") for name, value in table.items()}
        return cls(version, topics)
