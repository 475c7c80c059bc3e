"""One broker's replicated metadata and the pure rules for adopting a peer's copy.

What a replica pulls from a peer of its group (``GetReplicaMetadata``) is a
:class:`ReplicaMetadata`: the topic table, the subscription-group table, the consumer-offset
table and the timer checkpoint (RelayMQ's delay offsets: delays run on the timer), each with
its DataVersion, taken as one snapshot of one broker.

Rules (reference section 3 and 2.5):
- ``FROM_MASTER`` (RocketMQ's ``SlaveSynchronize``): a slave adopts its master's table
  whenever the DataVersions differ, and copies the master's DataVersion; equal versions
  change nothing.  Only a MASTER reply with broker id 0 and the slave's own broker name is
  adopted (:func:`check_master_reply`).
- ``REVERSE`` (pre-online, ``syncMetadataReverse``): a returning master adopts a slave's
  table by the one pre-online rule, ``metadata.pre_online_merge`` (``master.compare(slave)
  <= 0``: ties adopt, harmless).
- Topics: the remote table replaces the local one, except that local system topics the
  remote table lacks are kept (a replica's own retry/DLQ/internal topics stay usable).
- Consumer offsets: ``FROM_MASTER`` copies the master's table as it is (a slave commits no
  offsets of its own); ``REVERSE`` replaces per ``topic@group`` key and keeps keys only the
  local table has (RocketMQ's ``putAll``; ``pre_online_merge.merge_offsets``).
Pure: no clock, no I/O; rejections are named reasons.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping, Union

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion
from metadata.pre_online_merge import merge_offsets, plan_merge
from metadata.names import is_system_topic
from metadata.subscription_group import SubscriptionGroupTable
from metadata.topic_config import TopicTable

MASTER_ID = 0
_LOCAL, _REMOTE = 0, 1  # a returning master (the local replica) merging one peer's copy


@dataclass(frozen=True)
class VersionedDocument:
    """A table kept as its file document (the timer checkpoint), with its DataVersion."""

    data_version: DataVersion = DataVersion()
    document: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "document", MappingProxyType(dict(self.document)))


@dataclass(frozen=True)
class ReplicaMetadata:
    broker_name: str
    broker_id: int
    role: str  # "MASTER" | "SLAVE"
    topics: TopicTable
    groups: SubscriptionGroupTable
    offsets: ConsumerOffsetTable
    timer_checkpoint: VersionedDocument

    def versions(self) -> dict[str, DataVersion]:
        return {"topics": self.topics.data_version, "groups": self.groups.data_version,
                "offsets": self.offsets.data_version, "timer_checkpoint": self.timer_checkpoint.data_version}


class SyncDirection(str, Enum):
    FROM_MASTER = "FROM_MASTER"  # a slave follows its master
    REVERSE = "REVERSE"  # a returning master pulls from a slave (pre-online)


class AdoptReason(str, Enum):
    VERSION_DIFFERS = "VERSION_DIFFERS"
    REMOTE_NOT_OLDER = "REMOTE_NOT_OLDER"


class KeepReason(str, Enum):
    SAME_VERSION = "SAME_VERSION"
    LOCAL_NEWER = "LOCAL_NEWER"
    CHANGED_MEANWHILE = "CHANGED_MEANWHILE"  # the local table moved while the adopted one was written


@dataclass(frozen=True)
class Adopt:
    reason: AdoptReason
    local_version: DataVersion
    remote_version: DataVersion


@dataclass(frozen=True)
class Keep:
    reason: KeepReason
    local_version: DataVersion
    remote_version: DataVersion


Adoption = Union[Adopt, Keep]


def decide_adoption(local: DataVersion, remote: DataVersion,
                    direction: SyncDirection = SyncDirection.FROM_MASTER) -> Adoption:
    """Whether a replica replaces its table by the remote one (which then brings its version)."""
    if direction is SyncDirection.REVERSE:
        if plan_merge(_LOCAL, {_LOCAL: local, _REMOTE: remote}).adopts(_REMOTE):
            return Adopt(AdoptReason.REMOTE_NOT_OLDER, local, remote)
        return Keep(KeepReason.LOCAL_NEWER, local, remote)
    if local == remote:
        return Keep(KeepReason.SAME_VERSION, local, remote)
    return Adopt(AdoptReason.VERSION_DIFFERS, local, remote)


class ReplyRejected(str, Enum):
    WRONG_BROKER_NAME = "WRONG_BROKER_NAME"
    NOT_THE_MASTER = "NOT_THE_MASTER"


def check_master_reply(broker_name: str, reply: ReplicaMetadata) -> ReplyRejected | None:
    """None when ``reply`` is from the master (id 0) of ``broker_name``; else why not."""
    if reply.broker_name != broker_name:
        return ReplyRejected.WRONG_BROKER_NAME
    if reply.broker_id != MASTER_ID or reply.role != "MASTER":
        return ReplyRejected.NOT_THE_MASTER
    return None


def adopted_topics(local: TopicTable, remote: TopicTable) -> TopicTable:
    """The remote table and version, plus the local system topics it lacks."""
    kept = {name: config for name, config in local.topics.items() if is_system_topic(name) and name not in remote.topics}
    return TopicTable(remote.data_version, {**remote.topics, **kept})


def adopted_offsets(local: ConsumerOffsetTable, remote: ConsumerOffsetTable,
                    direction: SyncDirection = SyncDirection.FROM_MASTER) -> ConsumerOffsetTable:
    """FROM_MASTER: the remote table as it is; REVERSE: the pre-online merge (per-key replacement
    over the local table when the remote one is not older, else the local table)."""
    if direction is SyncDirection.FROM_MASTER:
        return remote
    return merge_offsets(_LOCAL, {_LOCAL: local, _REMOTE: remote})
