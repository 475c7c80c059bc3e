"""The contract between the client-facing gRPC servicer and one broker.

The servicer (``services/messaging/``) validates and converts protobuf requests into these
frozen values, picks the :class:`BrokerApi` through a :class:`BrokerDirectory`, and turns
results (or :class:`metadata.status.RequestRejected`) into responses.  Brokers know nothing
of protobuf or gRPC.

Times are milliseconds.  ``deadline_ms`` values are on the broker's monotonic clock
(``Clock.monotonic_ms``), already reduced by the servicer's safety margin.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, Protocol, Sequence

from metadata.frozen_values import quick_init
from metadata.message import MessageDraft, MessageType, SendItem, StoredMessage  # noqa: F401 - SendItem: part of this contract
from metadata.status import RequestRejected


class FilterType(str, Enum):
    TAG = "TAG"
    SQL = "SQL"


@quick_init
@dataclass(frozen=True)
class FilterExpression:
    type: FilterType = FilterType.TAG
    expression: str = "*"


class SendOutcome(NamedTuple):
    """One sent message's answer.  A named tuple: the send path makes one per message, from the
    plain tuple its de-duplication memory keeps, with ``tuple.__new__`` (C, no ``__init__``)."""

    message_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str = ""  # non-empty for TRANSACTION
    recall_handle: str = ""  # non-empty for DELAY


@quick_init
@dataclass(frozen=True)
class ReceiveRequest:
    client_id: str
    group: str
    topic: str
    queue_id: int  # -1: any queue of the topic on this broker
    filter: FilterExpression
    batch_size: int
    invisible_ms: int  # already chosen by the servicer (auto_renew: 60 s)
    auto_renew: bool
    long_poll_ms: int
    deadline_ms: int  # monotonic; answer (possibly empty) before it
    attempt_id: str = ""
    max_delivery_attempts: int | None = None  # from the client's settings, else the group's config
    # the client picks a queue per receive (SimpleConsumer): with nothing here, the long poll ends
    # at once while another broker of the topic holds messages for the group (backlog_board)
    yields_to_backlog_elsewhere: bool = False


@quick_init
@dataclass(frozen=True)
class Delivery:
    message: StoredMessage
    receipt_handle: str  # new for every delivery
    delivery_attempt: int  # 1-based
    invisible_until_ms: int  # wall-clock ms
    dead_letter_origin: tuple[str, str] | None = None  # (topic, message_id) for DLQ messages


@dataclass(frozen=True)
class TransactionCheck:
    """An orphaned half message the broker wants a producer to resolve."""

    topic: str
    transaction_id: str
    message: StoredMessage


class TransactionCheckSink(Protocol):
    def push_transaction_check(self, check: TransactionCheck) -> bool:
        """Push to a live producer of ``check.topic``; False when none is connected."""


class BrokerApi(Protocol):
    name: str
    broker_id: int

    async def send(self, items: Sequence[SendItem]) -> list[SendOutcome]: ...

    async def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool, from_check: bool) -> None: ...

    async def recall(self, topic: str, recall_handle: str) -> str: ...

    async def receive(self, request: ReceiveRequest) -> list[Delivery]: ...

    async def ack(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None: ...

    async def ack_many(self, group: str, topic: str, receipt_handles: Sequence[str]) -> list[RequestRejected | None]:
        """One durable write for all; per handle None (acked) or the rejection of that one."""

    async def change_invisible_duration(self, group: str, topic: str, message_id: str, receipt_handle: str, invisible_ms: int) -> str: ...

    async def forward_to_dead_letter_queue(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None: ...

    def group_settings(self, group: str) -> "GroupSettings": ...


@dataclass(frozen=True)
class GroupSettings:
    """What a consumer's Telemetry settings reply carries for its group; ``known``: from the
    group's config (False: the defaults of a group this broker has no config for)."""

    fifo: bool = False
    max_delivery_attempts: int = 17  # retryMaxTimes + 1
    retry_delays_ms: tuple[int, ...] = (
        1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000,
        360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
    )
    known: bool = False


@dataclass(frozen=True)
class QueueRoute:
    topic: str
    queue_id: int
    broker_name: str
    broker_id: int
    permission: int  # 2 read, 4 write, 6 read+write (RocketMQ's PermName)
    accept_types: tuple[MessageType, ...]
    endpoint: tuple[str, int]  # plaintext client endpoint of the container hosting the broker
    tls_endpoint: tuple[str, int] | None = None  # its TLS client endpoint; None when it has no TLS port
    # plaintext: the broker endpoints (listenPort) of every replica of the group, when they have
    # them; clients then reach whichever replica is master without a route refresh
    broker_endpoints: tuple[tuple[str, int], ...] = ()


class BrokerDirectory(Protocol):
    """What the servicer needs from the container: its brokers and the cluster's routes."""

    def local_broker(self, broker_name: str) -> BrokerApi | None: ...

    def local_master_for_topic(self, topic: str) -> BrokerApi | None: ...

    async def route(self, topic: str) -> list[QueueRoute]: ...
