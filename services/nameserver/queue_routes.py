"""Routes as the client-facing servicer needs them: one :class:`QueueRoute` per queue.

Rules (reference grpc-client-protocol section 4, QueryRoute):
- Only a group's id-0 member is routed (clients keep ``broker.id == 0`` only); after the
  acting-master rewrite that may be a slave, with a read-only permission.
- A group whose replicas have endpoints of their own (``listenPort``) is routed with all of
  them, sorted, whether or not a master is registered at this moment: the official clients
  open one channel over a queue's addresses and move to the next one when a connection
  fails, and whichever replica is master serves there (the others relay to it, or hold the
  call while an election runs).  So a failover changes no route: the queue list clients
  hash FIFO groups over stays the same, and no client waits for its 30 s route refresh.
- Queue ``i`` is readable when ``i < readQueueNums`` and writable when ``i < writeQueueNums``,
  each only if the topic's perm allows it (RocketMQ's PermName: 4 read, 2 write).
- The endpoints are the client endpoints of the container hosting that broker: plaintext,
  and TLS when that container has a TLS port (the servicer picks by the caller's scheme).
"""
from __future__ import annotations

from metadata.message import MessageType
from metadata.route_types import MASTER_ID, TopicRoute
from metadata.topic_config import PERM_READ, PERM_WRITE
from services.broker.api import QueueRoute


def accept_types(message_type: str) -> tuple[MessageType, ...]:
    if message_type == "MIXED":
        return tuple(MessageType)
    try:
        return (MessageType(message_type),)
    except ValueError:
        return (MessageType.NORMAL,)


def queue_routes(route: TopicRoute) -> list[QueueRoute]:
    queues = []
    for broker in route.brokers:
        own = tuple(sorted({host_port(a.broker_endpoint) for a in broker.addresses.values() if a.broker_endpoint}))
        master = broker.addresses.get(MASTER_ID)
        if master is None and own:
            master = broker.addresses[min(broker.addresses)]
        if master is None:
            continue
        endpoint = host_port(master.client_endpoint)
        tls_endpoint = host_port(master.tls_client_endpoint) if master.tls_client_endpoint else None
        data = broker.queue_data
        types = accept_types(data.message_type)
        for queue_id in range(max(data.read_queue_nums, data.write_queue_nums)):
            perm = 0
            if queue_id < data.read_queue_nums:
                perm |= data.perm & PERM_READ
            if queue_id < data.write_queue_nums:
                perm |= data.perm & PERM_WRITE
            queues.append(QueueRoute(route.topic, queue_id, broker.broker_name, MASTER_ID, perm, types,
                                     endpoint, tls_endpoint, own))
    return queues


def host_port(endpoint: str) -> tuple[str, int]:
    """``host:port`` (validated by the nameserver when the broker registered) -> (host, port)."""
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)
