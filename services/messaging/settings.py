"""Telemetry settings: what a client declared, and the reply the server owes it.

Rules (reference section 6):
- The reply echoes the client's settings and adds the server's fields; the official
  clients ignore any reply whose status is not OK, so the servicer always answers OK.
- Producers get ``publishing.max_body_size`` (never 0: the Python client would refuse every
  send) and an *exponential* backoff (the Java producer throws on anything else).
- Consumers get ``subscription.long_polling_timeout`` (else push consumers do not long
  poll), ``receive_batch_size``, ``fifo`` from the group, and a customized backoff with
  ``max_attempts`` from the group's settings.
- Settings without a publishing or subscription part are malformed (the proxy fails the
  stream with INVALID_ARGUMENT; so do we).
Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.status import Code, RequestRejected
from proto import messaging_definition_pb2 as pb
from services.broker.api import GroupSettings
from services.messaging.config import MessagingConfig

PRODUCER = "PRODUCER"
CONSUMER_TYPES = {pb.PUSH_CONSUMER: "PUSH_CONSUMER", pb.SIMPLE_CONSUMER: "SIMPLE_CONSUMER", pb.PULL_CONSUMER: "PULL_CONSUMER"}


@dataclass(frozen=True)
class ClientSettings:
    client_type: str
    topics: frozenset[str] = frozenset()  # producers: the topics they publish; consumers: subscribed
    group: str = ""
    max_attempts: int | None = None  # consumer's own backoff_policy.max_attempts, if it sent one


def client_settings(settings: pb.Settings) -> ClientSettings:
    """What the server remembers of a client's settings; RequestRejected when malformed."""
    case = settings.WhichOneof("pub_sub")
    if case is None:
        raise RequestRejected(Code.BAD_REQUEST, "settings carry neither publishing nor subscription")
    if case == "publishing":
        return ClientSettings(PRODUCER, frozenset(t.name for t in settings.publishing.topics))
    subscription = settings.subscription
    attempts = settings.backoff_policy.max_attempts if settings.HasField("backoff_policy") else 0
    return ClientSettings(
        client_type=CONSUMER_TYPES.get(settings.client_type, "CONSUMER"),
        topics=frozenset(entry.topic.name for entry in subscription.subscriptions),
        group=subscription.group.name,
        max_attempts=attempts if attempts > 0 else None,
    )


def _ms(duration, ms: int) -> None:
    duration.seconds, rest = divmod(ms, 1000)
    duration.nanos = rest * 1_000_000


def reply(settings: pb.Settings, config: MessagingConfig, group: GroupSettings | None) -> pb.Settings:
    """The client's settings echoed, with the server's fields set."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    merged.metric.CopyFrom(pb.Metric(on=False))
    if merged.WhichOneof("pub_sub") == "publishing":
        merged.publishing.max_body_size = config.max_message_size
        merged.publishing.validate_message_type = True
        policy = merged.backoff_policy
        policy.Clear()
        policy.max_attempts = config.producer_max_attempts
        _ms(policy.exponential_backoff.initial, config.producer_backoff_initial_ms)
        _ms(policy.exponential_backoff.max, config.producer_backoff_max_ms)
        policy.exponential_backoff.multiplier = config.producer_backoff_multiplier
        return merged
    group = group or GroupSettings()
    subscription = merged.subscription
    subscription.fifo = group.fifo
    subscription.receive_batch_size = config.receive_batch_size
    _ms(subscription.long_polling_timeout, config.max_long_polling_ms)
    policy = merged.backoff_policy
    policy.Clear()
    policy.max_attempts = group.max_delivery_attempts
    policy.customized_backoff.SetInParent()
    for delay_ms in group.retry_delays_ms:
        _ms(policy.customized_backoff.next.add(), delay_ms)
    return merged
