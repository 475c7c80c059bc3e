"""The broker's topics: the table, its file ``config/topics.json`` and the send-side checks.

Rules:
- Every change bumps the table's DataVersion and is persisted atomically before the call
  returns (the caller awaits nothing else: the write is small and synchronous).
- An unknown user topic is TOPIC_NOT_FOUND unless ``autoCreateTopicEnable`` (then it is
  created NORMAL with ``defaultTopicQueueNums`` queues).  System topics (retry, DLQ, the
  broker's own logs) are created on demand with one read-write queue.
- A send checks: the topic exists, is writable (else FORBIDDEN) and accepts the message type
  (else MESSAGE_PROPERTY_CONFLICT_WITH_TYPE).
- :meth:`TopicManager.adopt` replaces the table by a peer's (with the peer's DataVersion, not
  a bump) as ``metadata.replica_metadata`` decides; nothing is written when it keeps.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from metadata.data_version import DataVersion
from metadata.message import MessageType
from metadata.names import is_system_topic
from metadata.replica_metadata import Adopt, Adoption, SyncDirection, adopted_topics, decide_adoption
from metadata.status import Code, RequestRejected
from metadata.topic_config import PERM_READ, PERM_WRITE, TopicConfig, TopicTable
from services.broker.config import BrokerConfig
from services.broker.config_files import read_document, write_document

FILE_NAME = "topics.json"


class TopicManager:
    def __init__(self, config: BrokerConfig, config_dir: Path, on_change: Callable[[], None] = lambda: None):
        """``on_change()`` after every change this broker makes (not after adopting a peer's)."""
        self.config = config
        self.path = config_dir / FILE_NAME
        self.table = TopicTable()
        self._on_change = on_change

    def load(self) -> None:
        table = read_document(self.path, TopicTable.from_document)
        self.table = table if table is not None else TopicTable()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.topics.get(topic)

    def upsert(self, config: TopicConfig, now_ms: int) -> None:
        config.validate()
        self.table = self.table.with_topic(config, self.table.data_version.next_version(now_ms))
        write_document(self.path, self.table.file_document())
        self._on_change()

    def delete(self, topic: str, now_ms: int) -> bool:
        if topic not in self.table.topics:
            return False
        self.table = self.table.without_topic(topic, self.table.data_version.next_version(now_ms))
        write_document(self.path, self.table.file_document())
        self._on_change()
        return True

    def adopt(self, remote: TopicTable, direction: SyncDirection = SyncDirection.FROM_MASTER) -> Adoption:
        decision = decide_adoption(self.table.data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            table = adopted_topics(self.table, remote)
            write_document(self.path, table.file_document())
            self.table = table
        return decision

    def stamp_state_version(self, state_version: int, now_ms: int) -> None:
        """Controller mode: the table's stateVersion becomes the master epoch after a role
        change (reference 3), so the nameserver can prefer the newer master (upstream #6316)."""
        if self.table.data_version.state_version == state_version:
            return
        self.table = TopicTable(self.table.data_version.next_version(now_ms, state_version), self.table.topics)
        write_document(self.path, self.table.file_document())

    def ensure_system_topic(self, topic: str, now_ms: int, queues: int = 1) -> TopicConfig:
        existing = self.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topic, queues, queues, message_type="MIXED")
        self.upsert(config, now_ms)
        return config

    def for_send(self, topic: str, message_type: MessageType, now_ms: int) -> TopicConfig:
        config = self.get(topic)
        if config is None:
            if not self.config.auto_create_topic_enable or is_system_topic(topic):
                raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.config.broker_name}")
            config = TopicConfig(topic, self.config.default_topic_queue_nums, self.config.default_topic_queue_nums)
            self.upsert(config, now_ms)
        if not config.perm & PERM_WRITE:
            raise RequestRejected(Code.FORBIDDEN, f"topic {topic} is not writable (perm {config.perm})")
        if message_type not in config.accepts():
            raise RequestRejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                  f"topic {topic} accepts {config.message_type} messages, not {message_type.value}")
        return config

    def for_receive(self, topic: str) -> TopicConfig:
        config = self.get(topic)
        if config is None:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.config.broker_name}")
        if not config.perm & PERM_READ:
            raise RequestRejected(Code.FORBIDDEN, f"topic {topic} is not readable (perm {config.perm})")
        return config

    @property
    def data_version(self) -> DataVersion:
        return self.table.data_version
