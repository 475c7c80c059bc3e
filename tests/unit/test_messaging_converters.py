"""Edge validation of every RPC family, through the converters (no sockets)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, strategies as st
from google.protobuf import duration_pb2

from metadata.message import MessageType, Prop
from metadata.status import Code, RequestRejected
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from services.messaging import converters as c
from services.messaging.config import MessagingConfig

CFG = MessagingConfig()
NOW = 1_700_000_000_000


def msg(topic="t", body=b"x", **system):
    system.setdefault("message_id", "01ABCDEF")
    system.setdefault("message_type", d.NORMAL)
    return d.Message(topic=d.Resource(name=topic), body=body, system_properties=d.SystemProperties(**system))


def send(*messages, config=CFG):
    return c.send_items(s.SendMessageRequest(messages=list(messages)), config, NOW, "cid")


def rejected(code, fn, *args, **kwargs):
    with pytest.raises(RequestRejected) as caught:
        fn(*args, **kwargs)
    assert caught.value.code == code, caught.value
    return caught.value


# ------------------------------------------------------------------ metadata

def test_client_id_is_required():
    rejected(Code.CLIENT_ID_REQUIRED, c.client_context, ())
    rejected(Code.CLIENT_ID_REQUIRED, c.client_context, (("x-mq-client-id", "  "),))
    rejected(Code.CLIENT_ID_REQUIRED, c.client_context, (("x-mq-client-id", "a\x00b"),))
    ctx = c.client_context((("x-mq-client-id", "h@1@0@x"), ("x-mq-language", "PYTHON"), ("x-mq-namespace", "")))
    assert ctx.client_id == "h@1@0@x" and ctx.language == "PYTHON"


# ------------------------------------------------------------------ send

def test_a_valid_message_becomes_a_send_item():
    item, = send(msg(tag="a", keys=["k1", "k2"]))
    assert item.message_type is MessageType.NORMAL and item.draft.queue_id == -1
    assert item.draft.properties[Prop.TAG] == "a" and item.draft.properties[Prop.KEYS] == "k1 k2"
    assert item.draft.born_timestamp_ms == NOW and item.producer_client_id == "cid"


def test_body_limits():
    rejected(Code.MESSAGE_BODY_EMPTY, send, msg(body=b""))
    small = dataclasses.replace(CFG, max_message_size=10)
    send(msg(body=b"x" * 10), config=small)
    rejected(Code.MESSAGE_BODY_TOO_LARGE, send, msg(body=b"x" * 11), config=small)
    rejected(Code.MESSAGE_BODY_TOO_LARGE, send, msg(body=b"x" * (4 * 1024 * 1024 + 1)))


def test_gzip_body_is_inflated_and_garbage_gzip_is_corrupted():
    import gzip
    item, = send(msg(body=gzip.compress(b"hello"), body_encoding=d.GZIP))
    assert item.draft.body == b"hello"
    rejected(Code.MESSAGE_CORRUPTED, send, msg(body=b"not gzip", body_encoding=d.GZIP))


def test_user_property_limits():
    m = msg()
    for i in range(128):
        m.user_properties[f"k{i}"] = "v"
    send(m)
    m.user_properties["one-more"] = "v"
    rejected(Code.MESSAGE_PROPERTIES_TOO_LARGE, send, m)
    big = msg()
    big.user_properties["k"] = "v" * (16 * 1024)
    rejected(Code.MESSAGE_PROPERTIES_TOO_LARGE, send, big)
    for key, value in (("", "v"), ("a\nb", "v"), ("k", "v\x07")):
        bad = msg()
        bad.user_properties[key] = value
        rejected(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, send, bad)


def test_tag_rules():
    for tag in ("a|b", "", "  ", "a\tb", "x" * 1025):
        rejected(Code.ILLEGAL_MESSAGE_TAG, send, msg(tag=tag))
    send(msg(tag="TagA"))


def test_key_rules():
    for keys in ([""], ["a b"], ["a\x01"], ["k"] * 65):
        rejected(Code.ILLEGAL_MESSAGE_KEY, send, msg(keys=keys))


def test_message_id_rules():
    for message_id in ("", "x" * 129, "a\nb", "ünï"):
        rejected(Code.ILLEGAL_MESSAGE_ID, send, msg(message_id=message_id))


def test_topic_rules():
    for topic in ("", "has space", "x" * 128, "%DLQ%g", "rmq_sys_x", "TBW102"):
        rejected(Code.ILLEGAL_TOPIC, send, msg(topic=topic))
    rejected(Code.ILLEGAL_TOPIC, send, msg(topic="a"), msg(topic="b"))


def test_batch_limits():
    rejected(Code.BAD_REQUEST, send)
    rejected(Code.BAD_REQUEST, send, msg(), msg(), config=dataclasses.replace(CFG, max_send_batch_num=1))


def test_fifo_needs_a_short_message_group():
    item, = send(msg(message_type=d.FIFO, message_group="g1"))
    assert item.message_group == "g1" and item.draft.properties[Prop.MESSAGE_GROUP] == "g1"
    rejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send, msg(message_type=d.FIFO))
    rejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send, msg(message_type=d.NORMAL, message_group="g"))
    send(msg(message_type=d.FIFO, message_group="g" * 63))
    rejected(Code.ILLEGAL_MESSAGE_GROUP, send, msg(message_type=d.FIFO, message_group="g" * 64))
    rejected(Code.ILLEGAL_MESSAGE_GROUP, send, msg(message_type=d.FIFO, message_group="a\x00"))
    rejected(Code.ILLEGAL_MESSAGE_GROUP, send, msg(message_type=d.FIFO, message_group=" "))


def test_delay_needs_a_timestamp_at_most_a_day_ahead():
    def delayed(ms, kind=d.DELAY):
        m = msg(message_type=kind)
        m.system_properties.delivery_timestamp.FromMilliseconds(ms)
        return m

    item, = send(delayed(NOW + 86_400_000))
    assert item.delivery_timestamp_ms == NOW + 86_400_000
    assert item.draft.properties[Prop.DELIVERY_TIME_MS] == str(NOW + 86_400_000)
    send(delayed(NOW - 5_000))  # in the past: deliver now
    rejected(Code.ILLEGAL_DELIVERY_TIME, send, delayed(NOW + 86_400_001))
    rejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send, msg(message_type=d.DELAY))
    rejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send, delayed(NOW + 1, kind=d.NORMAL))


def test_unspecified_type_is_inferred_and_unknown_types_unsupported():
    assert send(msg(message_type=d.MESSAGE_TYPE_UNSPECIFIED))[0].message_type is MessageType.NORMAL
    assert send(msg(message_type=0, message_group="g"))[0].message_type is MessageType.FIFO
    rejected(Code.UNSUPPORTED, send, msg(message_type=d.LITE))
    rejected(Code.UNSUPPORTED, send, msg(message_type=99))


def test_transaction_messages_carry_no_group_or_schedule():
    assert send(msg(message_type=d.TRANSACTION))[0].message_type is MessageType.TRANSACTION
    rejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send, msg(message_type=d.TRANSACTION, message_group="g"))


# ------------------------------------------------------------------ receive

def receive(config=CFG, remaining_ms=30_000, **fields):
    fields.setdefault("group", d.Resource(name="g"))
    fields.setdefault("message_queue", d.MessageQueue(topic=d.Resource(name="t"), id=-1))
    fields.setdefault("batch_size", 16)
    fields.setdefault("invisible_duration", duration_pb2.Duration(seconds=15))
    return c.receive_request(s.ReceiveMessageRequest(**fields), config, "cid", 1_000, remaining_ms)


def test_receive_defaults_and_clamps():
    r = receive(long_polling_timeout=duration_pb2.Duration(seconds=60), batch_size=1000)
    assert r.long_poll_ms == 20_000 and r.deadline_ms == 21_000 and r.batch_size == 32 and r.queue_id == -1
    assert r.filter.expression == "*" and r.invisible_ms == 15_000 and r.topic == "t" and r.group == "g"
    assert receive(long_polling_timeout=duration_pb2.Duration(seconds=1)).long_poll_ms == 5_000
    assert receive(remaining_ms=8_000, long_polling_timeout=duration_pb2.Duration(seconds=20)).long_poll_ms == 7_800
    assert receive(remaining_ms=None).long_poll_ms == 5_000


def test_receive_polling_time_too_short():
    rejected(Code.ILLEGAL_POLLING_TIME, receive, remaining_ms=5_100)
    rejected(Code.ILLEGAL_POLLING_TIME, receive, remaining_ms=0)
    receive(remaining_ms=5_200)


def test_receive_invisible_duration_limits():
    rejected(Code.ILLEGAL_INVISIBLE_TIME, receive, invisible_duration=duration_pb2.Duration(seconds=9))
    rejected(Code.ILLEGAL_INVISIBLE_TIME, receive, invisible_duration=duration_pb2.Duration(seconds=12 * 3600 + 1))
    request = s.ReceiveMessageRequest(group=d.Resource(name="g"), message_queue=d.MessageQueue(topic=d.Resource(name="t")),
                                      batch_size=1)
    rejected(Code.ILLEGAL_INVISIBLE_TIME, c.receive_request, request, CFG, "cid", 0, 30_000)
    request.auto_renew = True
    assert c.receive_request(request, CFG, "cid", 0, 30_000).invisible_ms == 60_000


def test_receive_bad_fields():
    rejected(Code.ILLEGAL_CONSUMER_GROUP, receive, group=d.Resource(name=""))
    rejected(Code.ILLEGAL_CONSUMER_GROUP, receive, group=d.Resource(name="bad group"))
    rejected(Code.ILLEGAL_TOPIC, receive, message_queue=d.MessageQueue())
    rejected(Code.BAD_REQUEST, receive, batch_size=0)
    rejected(Code.BAD_REQUEST, receive, batch_size=-3)
    rejected(Code.ILLEGAL_FILTER_EXPRESSION, receive, filter_expression=d.FilterExpression(type=d.TAG, expression="a\x00"))
    rejected(Code.ILLEGAL_FILTER_EXPRESSION, receive, filter_expression=d.FilterExpression(type=7, expression="a"))
    rejected(Code.BAD_REQUEST, receive, attempt_id="x" * 300)
    sql = receive(filter_expression=d.FilterExpression(type=d.SQL, expression="a > 1"))
    assert sql.filter.type.value == "SQL" and sql.filter.expression == "a > 1"


# ------------------------------------------------------------------ handles, ack, change, DLQ, tx, recall

def test_receipt_handles_are_checked_at_the_edge():
    assert c.split_receipt_handle(c.join_receipt_handle("broker-a", "h@1"), CFG) == ("broker-a", "h@1")
    for garbage in ("", "nohandle", "@x", "b@", "a\x00@b", "x" * 5000, "ü@x"):
        rejected(Code.INVALID_RECEIPT_HANDLE, c.split_receipt_handle, garbage, CFG)


def test_ack_entries():
    def ack(*entries, group="g", topic="t"):
        return c.ack_entries(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                 entries=list(entries)), CFG)

    group, topic, entries = ack(s.AckMessageEntry(message_id="01", receipt_handle="b@h"))
    assert (group, topic, entries[0].broker_name, entries[0].receipt_handle) == ("g", "t", "b", "h")
    rejected(Code.BAD_REQUEST, ack)
    rejected(Code.INVALID_RECEIPT_HANDLE, ack, s.AckMessageEntry(message_id="01", receipt_handle="junk"))
    rejected(Code.ILLEGAL_MESSAGE_ID, ack, s.AckMessageEntry(message_id="", receipt_handle="b@h"))
    rejected(Code.ILLEGAL_CONSUMER_GROUP, ack, s.AckMessageEntry(message_id="01", receipt_handle="b@h"), group="")
    rejected(Code.BAD_REQUEST, ack, *[s.AckMessageEntry(message_id="01", receipt_handle="b@h")] * 1025)


def test_change_invisible_limits():
    def change(seconds=None, handle="b@h"):
        request = s.ChangeInvisibleDurationRequest(group=d.Resource(name="g"), topic=d.Resource(name="t"),
                                                   receipt_handle=handle, message_id="01")
        if seconds is not None:
            request.invisible_duration.seconds = seconds
        return c.change_invisible(request, CFG)

    assert change(0).invisible_ms == 0 and change(5).invisible_ms == 5_000
    rejected(Code.ILLEGAL_INVISIBLE_TIME, change)
    rejected(Code.ILLEGAL_INVISIBLE_TIME, change, -1)
    rejected(Code.ILLEGAL_INVISIBLE_TIME, change, 12 * 3600 + 1)
    rejected(Code.INVALID_RECEIPT_HANDLE, change, 5, "garbage")


def test_forward_to_dlq_fields():
    ok = s.ForwardMessageToDeadLetterQueueRequest(group=d.Resource(name="g"), topic=d.Resource(name="t"),
                                                  receipt_handle="b@h", message_id="01")
    assert c.forward_to_dlq(ok, CFG).broker_name == "b"
    bad = s.ForwardMessageToDeadLetterQueueRequest()
    bad.CopyFrom(ok)
    bad.receipt_handle = ""
    rejected(Code.INVALID_RECEIPT_HANDLE, c.forward_to_dlq, bad, CFG)


def test_end_transaction_fields():
    def end(**fields):
        base = dict(topic=d.Resource(name="t"), message_id="01", transaction_id="tx", resolution=d.COMMIT)
        base.update(fields)
        return c.end_transaction(s.EndTransactionRequest(**base), CFG)

    assert end().commit is True and end(resolution=d.ROLLBACK).commit is False
    assert end(resolution=d.TRANSACTION_RESOLUTION_UNSPECIFIED).commit is None
    assert end(source=d.SOURCE_SERVER_CHECK).from_check
    rejected(Code.INVALID_TRANSACTION_ID, end, transaction_id="")
    rejected(Code.ILLEGAL_MESSAGE_ID, end, message_id="")
    rejected(Code.BAD_REQUEST, end, resolution=9)
    rejected(Code.ILLEGAL_TOPIC, end, topic=d.Resource(name=""))


def test_recall_fields():
    assert c.recall(s.RecallMessageRequest(topic=d.Resource(name="t"), recall_handle="R1"), CFG) == ("t", "R1")
    rejected(Code.BAD_REQUEST, c.recall, s.RecallMessageRequest(topic=d.Resource(name="t")), CFG)
    rejected(Code.ILLEGAL_TOPIC, c.recall, s.RecallMessageRequest(recall_handle="R1"), CFG)


@given(st.text(alphabet=st.characters(max_codepoint=0x3000), max_size=40))
def test_control_character_check_matches_java_iso_control(text):
    """The printable fast path must agree with Java's isISOControl on any text (separators
    like U+2028 are not printable yet not control characters)."""
    assert c.has_control_character(text) == any(ord(ch) <= 0x1F or 0x7F <= ord(ch) <= 0x9F for ch in text)


def _reference_ack_entry(message_id: str, receipt_handle: str):
    """The full checks alone: what ack_entries's quick path must agree with."""
    try:
        broker, handle = c.split_receipt_handle(receipt_handle, CFG)
        return ("ok", c.message_id(message_id, CFG), broker, handle)
    except RequestRejected as rejected:
        return ("rejected", rejected.code)


handle_text = st.one_of(st.text(max_size=12), st.builds(lambda a, b: f"{a}@{b}", st.text(max_size=6), st.text(max_size=6)))


@given(st.text(max_size=12), handle_text)
def test_ack_entries_quick_checks_agree_with_the_full_ones(message_id, receipt_handle):
    request = s.AckMessageRequest(group=d.Resource(name="G"), topic=d.Resource(name="T"),
                                  entries=[s.AckMessageEntry(message_id=message_id, receipt_handle=receipt_handle)])
    try:
        _, _, (entry,) = c.ack_entries(request, CFG)
        got = ("ok", entry.message_id, entry.broker_name, entry.receipt_handle)
    except RequestRejected as rejected:
        got = ("rejected", rejected.code)
    assert got == _reference_ack_entry(message_id, receipt_handle)
