"""The consumer offset table and its file format, ``config/consumerOffset.json``.

Format (reference section 7, written by RocketMQ with fastjson)::

    {"dataVersion":{"counter":N,"stateVersion":S,"timestamp":ms},
     "offsetTable":{"topic@group":{0:37960,1:12}}}

Rules:
- Keys are ``topic@group``; the topic may itself contain ``@`` only as the ``@broadcast``
  suffix convention of the group side, so the key splits at the *last* ``@``... except that
  RocketMQ splits at the first ``@``; topics and groups may not contain ``@`` (names are
  ``[%|a-zA-Z0-9_-]+``), so both agree on every valid key.  Keys that do not split into two
  valid names are reported, not guessed.
- ``groupTopicMap`` and ``lmqOffsetTable`` may appear and are ignored on read.
- ``dataVersion`` may be missing (old files): it reads as all zeros.
- Offsets are non-negative integers; anything else is a :class:`OffsetFileError` naming the key.

The table is a frozen value; commits produce a new table through
:meth:`ConsumerOffsetTable.with_offsets`, which shares every key's queues it does not change
with the old table (they are frozen too) and copies only the key index, with the hashes it
holds: a broker folds its commits into a table of 80,000 offsets at every snapshot, and
copying each key's queues, hashing each key again, took 110 ms of the event loop, twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from metadata import fastjson
from metadata.data_version import DataVersion, DataVersionFormatError
from metadata.names import is_valid_group_name, is_valid_topic_name


class OffsetFileError(ValueError):
    """A consumerOffset.json document is malformed; the message names where."""


@dataclass(frozen=True)
class OffsetKey:
    topic: str
    group: str

    def encode(self) -> str:
        return f"{self.topic}@{self.group}"

    @classmethod
    def decode(cls, raw: str) -> "OffsetKey":
        topic, sep, group = raw.partition("@")
        if not sep or not is_valid_topic_name(topic) or not is_valid_group_name(group.removesuffix("@broadcast")):
            raise OffsetFileError(f"offsetTable key {raw!r} is not of the form topic@group")
        return cls(topic, group)


def _freeze(table: Mapping[OffsetKey, Mapping[int, int]]) -> dict[OffsetKey, Mapping[int, int]]:
    return {key: MappingProxyType(dict(queues)) for key, queues in table.items()}


@dataclass(frozen=True)
class ConsumerOffsetTable:
    data_version: DataVersion = DataVersion()
    offsets: Mapping[OffsetKey, Mapping[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = _freeze(self.offsets)
        object.__setattr__(self, "offsets", MappingProxyType(keys))
        object.__setattr__(self, "_keys", keys)  # the proxy's dict: a copy of it keeps the hashes

    @classmethod
    def _sharing(cls, data_version: DataVersion, keys: dict) -> "ConsumerOffsetTable":
        """A table over ``keys`` (OffsetKey -> frozen queues), kept as it is: no copy."""
        table = object.__new__(cls)
        object.__setattr__(table, "data_version", data_version)
        object.__setattr__(table, "offsets", MappingProxyType(keys))
        object.__setattr__(table, "_keys", keys)
        return table

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.offsets.get(OffsetKey(topic, group), {}).get(queue_id)

    def rows(self) -> Iterator[tuple[str, str, int, int]]:
        """(topic, group, queue_id, offset) in a stable order."""
        for key in sorted(self.offsets, key=lambda k: (k.topic, k.group)):
            for queue_id, offset in sorted(self.offsets[key].items()):
                yield key.topic, key.group, queue_id, offset

    def with_offsets(self, updates: Mapping[tuple[str, str, int], int], data_version: DataVersion) -> "ConsumerOffsetTable":
        keys = dict(self._keys)
        changed: dict[OffsetKey, dict[int, int]] = {}
        for (topic, group, queue_id), offset in updates.items():
            assert offset >= 0, "offsets are validated before they reach the table"
            key = OffsetKey(topic, group)
            queues = changed.get(key)
            if queues is None:
                queues = changed[key] = dict(keys.get(key, {}))
            queues[queue_id] = offset
        for key, queues in changed.items():
            keys[key] = MappingProxyType(queues)
        return ConsumerOffsetTable._sharing(data_version, keys)

    def without_group(self, group: str, data_version: DataVersion) -> "ConsumerOffsetTable":
        table = {key: queues for key, queues in self.offsets.items() if key.group != group}
        return ConsumerOffsetTable(data_version, table)

    def to_document(self) -> dict[str, Any]:
        table = {key.encode(): {queue: offset for queue, offset in queues.items()} for key, queues in self.offsets.items()}
        return {"dataVersion": self.data_version.to_json(), "offsetTable": table}

    def dumps(self) -> str:
        return fastjson.dumps(self.to_document())


def parse_document(document: Any, where: str = "consumerOffset.json") -> ConsumerOffsetTable:
    if not isinstance(document, Mapping):
        raise OffsetFileError(f"{where}: top level is not an object")
    try:
        version = DataVersion.from_json(document["dataVersion"], f"{where}: dataVersion") if "dataVersion" in document else DataVersion()
    except DataVersionFormatError as exc:
        raise OffsetFileError(str(exc)) from None
    raw_table = document.get("offsetTable", {})
    if raw_table is None:
        raw_table = {}
    if not isinstance(raw_table, Mapping):
        raise OffsetFileError(f"{where}: offsetTable is not an object")
    table: dict[OffsetKey, dict[int, int]] = {}
    for raw_key, queues in raw_table.items():
        try:
            key = OffsetKey.decode(raw_key)
        except OffsetFileError as exc:
            raise OffsetFileError(f"{where}: {exc}") from None
        if not isinstance(queues, Mapping):
            raise OffsetFileError(f"{where}: offsetTable[{raw_key!r}] is not an object")
        parsed: dict[int, int] = {}
        for raw_queue, offset in queues.items():
            try:
                queue_id = int(raw_queue)
            except ValueError:
                raise OffsetFileError(f"{where}: offsetTable[{raw_key!r}] has queue id {raw_queue!r}, not an integer") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or queue_id < 0:
                raise OffsetFileError(f"{where}: offsetTable[{raw_key!r}][{raw_queue}] = {offset!r} is not a non-negative integer offset")
            parsed[queue_id] = offset
        table[key] = parsed
    return ConsumerOffsetTable(version, table)


def loads(text: str | bytes, where: str = "consumerOffset.json") -> ConsumerOffsetTable:
    """Parse the file's text (RocketMQ's fastjson dialect or strict JSON)."""
    try:
        document = fastjson.loads(text)
    except fastjson.FastJsonError as exc:
        raise OffsetFileError(f"{where}: {exc}") from None
    return parse_document(document, where)
