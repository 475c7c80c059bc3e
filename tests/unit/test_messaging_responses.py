"""Responses, Telemetry settings replies and the client registry (no sockets)."""
from __future__ import annotations

import asyncio
import zlib

from metadata.message import MessageDraft, MessageType, Prop, StoredMessage
from proto import messaging_definition_pb2 as d
from scheduler.clock import ManualClock
from services.broker.api import Delivery, GroupSettings, QueueRoute, TransactionCheck
from services.messaging import responses, settings
from services.messaging.client_registry import ClientRegistry
from services.messaging.config import MessagingConfig

CFG = MessagingConfig()


def stored(body=b"body", **props) -> StoredMessage:
    props.setdefault(Prop.MESSAGE_ID, "01AA")
    draft = MessageDraft("t", 2, body, 1_000_500, "10.0.0.1", props, {"u": "v"})
    return StoredMessage(draft, 0, len(body), 7, 2_000_250)


def route(host="127.0.0.1", perm=6, queue_id=0, broker="b"):
    return QueueRoute("t", queue_id, broker, 0, perm, (MessageType.FIFO,), (host, 8081))


def test_endpoint_scheme_follows_the_host():
    assert responses.endpoints("127.0.0.1", 1).scheme == d.IPv4
    assert responses.endpoints("::1", 1).scheme == d.IPv6
    assert responses.endpoints("broker.example", 1).scheme == d.DOMAIN_NAME


def test_route_queue_has_broker_id_zero_permission_types_and_endpoints():
    queue = responses.message_queue(route(perm=4), "", None)
    assert queue.broker.id == 0 and queue.permission == d.READ and list(queue.accept_message_types) == [d.FIFO]
    assert queue.broker.endpoints.addresses[0].port == 8081
    assert [responses.permission(p) for p in (0, 2, 4, 6)] == [d.NONE, d.WRITE, d.READ, d.READ_WRITE]
    fallback = responses.endpoints("10.1.1.1", 9)
    assert responses.message_queue(route(host="0.0.0.0"), "", fallback).broker.endpoints.addresses[0].host == "10.1.1.1"


def test_assignments_per_broker_or_per_queue():
    routes = [route(queue_id=q, broker=b) for b in ("a", "b") for q in range(3)] + [route(queue_id=9, perm=2)]
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in responses.assignments(routes, False, "", None)] == [("a", -1), ("b", -1)]
    assert len(responses.assignments(routes, True, "", None)) == 6


def test_delivered_message_has_every_field_the_clients_read():
    message = stored(**{Prop.TAG: "tg", Prop.KEYS: "k1 k2", Prop.MESSAGE_TYPE: "FIFO", Prop.MESSAGE_GROUP: "g",
                        Prop.DELIVERY_TIME_MS: "3000"})
    out = responses.delivered(Delivery(message, "h1", 3, 9_999, ("orig", "01ZZ")), "broker-a", "t")
    system = out.system_properties
    assert system.body_encoding == d.IDENTITY and system.receipt_handle == "broker-a@h1" and system.delivery_attempt == 3
    assert system.body_digest.type == d.CRC32 and system.body_digest.checksum == format(zlib.crc32(b"body"), "08X")
    assert system.tag == "tg" and list(system.keys) == ["k1", "k2"] and system.message_type == d.FIFO
    assert system.message_group == "g" and system.delivery_timestamp.ToMilliseconds() == 3000
    assert system.born_timestamp.ToMilliseconds() == 1_000_500 and system.store_timestamp.ToMilliseconds() == 2_000_250
    assert system.queue_id == 2 and system.queue_offset == 7 and out.user_properties["u"] == "v"
    assert system.dead_letter_queue.topic == "orig" and system.dead_letter_queue.message_id == "01ZZ"
    assert not responses.delivered(Delivery(stored(), "h", 1, 0), "b", "t").system_properties.HasField("dead_letter_queue")


def test_producer_settings_reply_has_body_size_and_exponential_backoff():
    client = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name="t")], max_body_size=134217728))
    reply = settings.reply(client, CFG, None)
    assert reply.publishing.max_body_size == 4 * 1024 * 1024 and reply.publishing.validate_message_type
    assert reply.backoff_policy.max_attempts == 3 and reply.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    assert reply.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert reply.backoff_policy.exponential_backoff.max.ToMilliseconds() == 1000
    assert reply.backoff_policy.exponential_backoff.multiplier == 2
    assert [t.name for t in reply.publishing.topics] == ["t"] and reply.client_type == d.PRODUCER


def test_consumer_settings_reply_has_polling_batch_fifo_and_customized_backoff():
    client = d.Settings(client_type=d.PUSH_CONSUMER, subscription=d.Subscription(group=d.Resource(name="g")))
    reply = settings.reply(client, CFG, GroupSettings(fifo=True, max_delivery_attempts=4, retry_delays_ms=(1000, 2000)))
    sub = reply.subscription
    assert sub.fifo and sub.receive_batch_size == 32 and sub.long_polling_timeout.seconds == 20
    assert reply.backoff_policy.max_attempts == 4
    assert [n.seconds for n in reply.backoff_policy.customized_backoff.next] == [1, 2]
    assert reply.metric.on is False


def test_settings_without_pub_sub_are_rejected_and_remembered_fields():
    import pytest
    from metadata.status import RequestRejected
    with pytest.raises(RequestRejected):
        settings.client_settings(d.Settings(client_type=d.PRODUCER))
    remembered = settings.client_settings(d.Settings(client_type=d.SIMPLE_CONSUMER, backoff_policy=d.RetryPolicy(max_attempts=5),
                                                     subscription=d.Subscription(group=d.Resource(name="g"))))
    assert remembered.group == "g" and remembered.max_attempts == 5 and remembered.client_type == "SIMPLE_CONSUMER"


def test_registry_pushes_checks_only_to_live_producers_of_the_topic():
    async def scenario():
        registry = ClientRegistry(CFG, ManualClock())
        check = TransactionCheck("t", "tx1", stored())
        assert not registry.push_transaction_check(check)
        consumer = registry.open_stream("c")
        registry.update_settings("c", settings.ClientSettings("SIMPLE_CONSUMER", frozenset({"t"}), "g"))
        producer = registry.open_stream("p")
        registry.update_settings("p", settings.ClientSettings(settings.PRODUCER, frozenset({"t"})))
        assert registry.push_transaction_check(check)
        command = producer.outbox.get_nowait()
        assert command.recover_orphaned_transaction_command.transaction_id == "tx1"
        assert command.recover_orphaned_transaction_command.message.system_properties.body_encoding == d.IDENTITY
        assert consumer.outbox.empty()
        registry.close_stream(producer)
        assert not registry.push_transaction_check(check)

    asyncio.run(scenario())


def test_registry_full_outbox_refuses_and_idle_clients_expire():
    async def scenario():
        import dataclasses
        clock = ManualClock()
        registry = ClientRegistry(dataclasses.replace(CFG, telemetry_outbox_size=1, max_clients=2), clock)
        stream = registry.open_stream("p")
        registry.note_publishing("p", "t")
        check = TransactionCheck("t", "tx", stored())
        assert registry.push_transaction_check(check) and not registry.push_transaction_check(check)
        registry.heartbeat("a", "PRODUCER", "")
        registry.heartbeat("b", "PRODUCER", "")
        assert len(registry) == 2 and registry.settings_of("p") is not None  # the streaming client is kept
        clock.advance(CFG.client_idle_timeout_ms + 1)
        assert registry.expire_idle() == 1 and len(registry) == 1
        registry.close_stream(stream)
        registry.terminate("p")
        assert len(registry) == 0

    asyncio.run(scenario())


def test_at_capacity_the_client_heard_from_longest_ago_without_a_stream_goes_and_expiry_stops_at_recent_ones():
    async def scenario():
        import dataclasses
        clock = ManualClock()
        registry = ClientRegistry(dataclasses.replace(CFG, max_clients=4), clock)
        for client_id in "abcd":  # a, b, c, d heard from in that order, 1 ms apart
            registry.heartbeat(client_id, "PRODUCER", "")
            clock.advance(1)
        registry.open_stream("a")      # a streams: kept; heard from now, the newest
        registry.heartbeat("b", "PRODUCER", "")  # b heard from again: newer than c and d
        clock.advance(1)
        registry.heartbeat("e", "PRODUCER", "")
        assert sorted(c.client_id for c in registry.snapshot()) == ["a", "b", "d", "e"]  # c, the oldest idle
        registry.heartbeat("f", "PRODUCER", "")
        assert sorted(c.client_id for c in registry.snapshot()) == ["a", "b", "e", "f"]  # then d
        clock.advance(CFG.client_idle_timeout_ms + 1)
        registry.heartbeat("f", "PRODUCER", "")  # f recent; a (streaming), b and e silent past the timeout
        assert registry.expire_idle() == 2 and sorted(c.client_id for c in registry.snapshot()) == ["a", "f"]

    asyncio.run(scenario())
