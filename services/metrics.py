"""Prometheus metrics of one process, in one registry.

Every metric carries ``broker`` (the broker name) where it is about one broker.  The
container serves :data:`REGISTRY` on its ``/metrics`` endpoint (a standalone nameserver or
controller on ``namesrvMetricsPort`` / ``controllerMetricsPort``).  docs/metrics.md lists
every metric and the alerts to set.  Gauges that are cheap to
compute on demand (store size, consumer lag) are refreshed by a collector callback the
container registers, not by the hot path.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from services.status_metrics import STATUS

REGISTRY = CollectorRegistry(auto_describe=True)
PROCESS = ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, fds, ...
REGISTRY.register(STATUS)  # brokers, replication, nameserver, controller: read from status when scraped

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

MESSAGES_SENT = Counter("relaymq_messages_sent", "Messages accepted by SendMessage", ["broker", "topic"], registry=REGISTRY)
MESSAGES_RECEIVED = Counter("relaymq_messages_received", "Messages delivered by ReceiveMessage", ["broker", "topic"], registry=REGISTRY)
MESSAGES_ACKED = Counter("relaymq_messages_acked", "Messages acknowledged", ["broker", "topic"], registry=REGISTRY)
RPC_LATENCY = Histogram("relaymq_rpc_latency_seconds", "Client RPC latency by method", ["method"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
RELAYED_CALLS = Counter("relaymq_relayed_calls", "Client calls a broker's own endpoint relayed to its group's master "
                        "in another container (via: link, a relay link; grpc)", ["broker", "method", "via"],
                        registry=REGISTRY)
BACKLOG_PROBES = Counter("relaymq_backlog_probes", "Backlog questions this container asked other brokers while "
                         "receives waited here (one per broker and round)", ["broker"], registry=REGISTRY)
RECEIVES_SENT_ELSEWHERE = Counter("relaymq_receives_sent_elsewhere", "Receives that found nothing here and ended their "
                                  "long poll at once because another broker of the topic held messages for the group",
                                  ["broker"], registry=REGISTRY)
EVENT_LOOP_LAG = Histogram("relaymq_event_loop_lag_seconds", "How much later than due the container's event loop ran a "
                           "look it asked for every 100 ms: time held by handlers, snapshots or threads holding the GIL",
                           buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
                           registry=REGISTRY)
RPC_ERRORS = Counter("relaymq_rpc_errors", "Client RPCs answered with a non-OK status", ["method", "code"], registry=REGISTRY)
STORE_SIZE = Gauge("relaymq_store_size_bytes", "Bytes on disk of a broker's store", ["broker"], registry=REGISTRY)
CONSUMER_LAG = Gauge("relaymq_consumer_lag_messages", "Messages not yet acked by a group", ["broker", "group", "topic"], registry=REGISTRY)
ROUTES_SERVED = Counter("relaymq_nameserver_routes_served", "Route queries the nameserver answered, by result",
                        ["result"], registry=REGISTRY)
BAD_REQUESTS = Counter("relaymq_bad_requests", "Requests that did not parse, by gRPC service and method (services/request_guard.py)",
                       ["service", "method"], registry=REGISTRY)
AUTHORIZATION_DENIED = Counter("relaymq_authorization_denied", "Client RPCs and admin commands refused by "
                               "authorization, by method and reason (metadata.authorization.AccessReason)",
                               ["method", "reason"], registry=REGISTRY)
CLUSTER_AUTH_REFUSED = Counter("relaymq_cluster_auth_refused", "Internal calls and replication connections refused "
                               "for want of a valid proof of the cluster secret", ["service", "reason"],
                               registry=REGISTRY)
BROKER_MOVES = Counter("relaymq_broker_moves", "Broker moves between containers (issue 26) by outcome: started, "
                       "completed, rolled_back (the target failed), cancelled", ["outcome"], registry=REGISTRY)
BROKER_MOVE_SECONDS = Histogram("relaymq_broker_move_duration_seconds", "Time from a move's commit to its end, by outcome",
                                ["outcome"], buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0), registry=REGISTRY)

_CHILDREN: dict[tuple[int, tuple[str, ...]], object] = {}


def labelled(metric, *values: str):
    """``metric.labels(*values)``, remembered: ``labels`` takes a lock and checks its arguments
    on every call, which the per-request hot path need not pay.  The registry keeps every child
    anyway, so this holds nothing it would have dropped."""
    key = (id(metric), values)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*values)
    return child
