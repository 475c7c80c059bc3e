"""The acting-master route rewrite (reference section 2.3, ``pickupTopicRouteData``).

Rules:
- Applied only when the nameserver's ``supportActingMaster`` is on (the route table decides
  that; this module is the rewrite itself) and never to ``rmq_sys_SYNC_BROKER_MEMBER_*`` topics.
- A group is rewritten when it has members, no id 0, ``enableActingMaster`` set, and its
  queue data is not writeable: the smallest id is moved to key 0, so clients see
  ``{0: slaveAddress}`` with a read-only permission.
- Members move whole: the id-0 key gets the slave's address and both its client endpoints
  (plaintext and TLS).
- Pure: a route in, a route out.
"""
from __future__ import annotations

from dataclasses import replace

from metadata.route_types import MASTER_ID, BrokerRoute
from metadata.topic_config import PERM_WRITE

SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def rewrite_for_acting_master(topic: str, route: BrokerRoute) -> BrokerRoute:
    if topic.startswith(SYNC_BROKER_MEMBER_PREFIX):
        return route
    addresses = dict(route.addresses)
    if not addresses or MASTER_ID in addresses or not route.enable_acting_master:
        return route
    if route.queue_data.perm & PERM_WRITE:
        return route
    smallest = min(addresses)
    addresses[MASTER_ID] = addresses.pop(smallest)
    return replace(route, addresses=addresses)
