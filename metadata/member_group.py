"""A broker group's live members as the nameserver knows them, and when it tells them (RIP-32).

Rules (reference 2.2 and 2.3):
- A group's member set is named ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`` (the system topic
  upstream's compatible mode routes it by; the acting-master route rewrite never applies to
  it): the ids of its registered, unexpired brokers with each one's internal address.
- When the group's smallest id changes, the nameserver pushes the new minimum
  (``NotifyMinBrokerIdChange``) with ``notifyMinBrokerIdChanged``:
  * the minimum left (unregistered, expired or replaced) and members remain: every remaining
    member is told, with the address that went offline; only in a group with acting master
    enabled (upstream's unregister path checks ``enableActingMaster``);
  * a lower id registered: every member except the new minimum is told (upstream's register
    path does not check the flag).
  Brokers poll the member set as the fallback (``syncBrokerMemberGroupPeriod``).
- Pure: member maps in, a notice (or None) out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def member_set_name(broker_name: str) -> str:
    return SYNC_BROKER_MEMBER_PREFIX + broker_name


@dataclass(frozen=True)
class BrokerMemberGroup:
    """The live members of one group: broker id -> internal (admin) address of its container."""

    cluster: str
    broker_name: str
    members: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", MappingProxyType(dict(sorted(self.members.items()))))

    @property
    def min_broker_id(self) -> int | None:
        return min(self.members) if self.members else None

    @property
    def name(self) -> str:
        return member_set_name(self.broker_name)


@dataclass(frozen=True)
class MinBrokerIdNotice:
    """What the nameserver pushes to ``targets`` (id -> address) of one group."""

    cluster: str
    broker_name: str
    min_broker_id: int
    min_broker_address: str
    offline_broker_address: str  # "" unless the previous minimum left
    targets: Mapping[int, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", MappingProxyType(dict(sorted(self.targets.items()))))


def decide_min_id_notice(before: BrokerMemberGroup, after: BrokerMemberGroup,
                         enable_acting_master: bool) -> MinBrokerIdNotice | None:
    """The notice owed after a group changed from ``before`` to ``after``, or None."""
    assert (before.cluster, before.broker_name) == (after.cluster, after.broker_name)
    old_min, new_min = before.min_broker_id, after.min_broker_id
    if new_min is None or old_min == new_min:
        return None
    if old_min is not None and new_min > old_min:  # the minimum left
        if not enable_acting_master:
            return None
        return MinBrokerIdNotice(after.cluster, after.broker_name, new_min, after.members[new_min],
                                 before.members[old_min], after.members)
    targets = {i: a for i, a in after.members.items() if i != new_min}
    if not targets:
        return None
    return MinBrokerIdNotice(after.cluster, after.broker_name, new_min, after.members[new_min], "", targets)
