"""What the admin service (``services/admin/``) needs from one broker.

Implemented by the broker (``services/broker/broker.py``); the admin gRPC service converts
requests into these calls and results into responses.  Mutations are async because they
persist (atomic write + fsync) before returning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion
from metadata.offset_write import OffsetWriteDecision, QueueOffset
from metadata.replica_metadata import ReplicaMetadata
from metadata.subscription_group import SubscriptionGroupConfig, SubscriptionGroupTable
from metadata.topic_config import TopicConfig, TopicTable
from services.broker.message_query import MessageMatch, QueryResult


@dataclass(frozen=True)
class QueueStatus:
    queue_id: int
    min_offset: int
    max_offset: int  # next offset to be written
    last_update_ms: int  # store time of the newest message, 0 when empty


@dataclass(frozen=True)
class QueueProgress:
    topic: str
    queue_id: int
    broker_offset: int  # max offset of the queue
    consumer_offset: int  # committed consumer offset (everything before it is acked)
    inflight: int  # messages delivered and not yet acked

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


class BrokerAdminApi(Protocol):
    name: str
    broker_id: int
    cluster: str

    @property
    def role(self) -> str:  # "MASTER" | "SLAVE"
        ...

    @property
    def is_acting(self) -> bool:
        """A slave acting for its absent master (RIP-32): it serves its group's reads and receives."""
        ...

    def topic_table(self) -> TopicTable: ...

    async def upsert_topic(self, config: TopicConfig) -> None: ...

    async def delete_topic(self, topic: str) -> None: ...

    def group_table(self) -> SubscriptionGroupTable: ...

    async def upsert_group(self, config: SubscriptionGroupConfig) -> None: ...

    async def delete_group(self, group: str) -> None: ...

    def topic_status(self, topic: str) -> list[QueueStatus]: ...

    def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]: ...

    def consumer_offset_table(self) -> ConsumerOffsetTable:
        """With a DataVersion that covers every commit so far (bumped first if needed), so two
        reads with one DataVersion saw the same offsets (what an offset write compares)."""
        ...

    async def write_consumer_offsets(self, expected: DataVersion, offsets: Sequence[QueueOffset]) -> OffsetWriteDecision:
        """Compare-and-set on the offset table's DataVersion (``metadata.offset_write``); durable
        before it returns.  Masters only."""
        ...

    def replica_metadata(self) -> ReplicaMetadata:
        """Topics, groups, offsets and timer checkpoint as one snapshot, each with a DataVersion
        that covers every change so far (what a peer replica adopts)."""
        ...

    async def reset_consumer_offsets(self, group: str, topic: str, timestamp_ms: int | None) -> list[tuple[int, int, int]]:
        """(queue id, old offset, new offset) per queue; ``timestamp_ms`` None: to the max offset.
        Masters only; durable before it returns."""
        ...

    async def query_messages(self, topic: str, match: MessageMatch, max_scan: int, max_results: int) -> QueryResult: ...

    def status(self) -> Mapping[str, object]: ...
