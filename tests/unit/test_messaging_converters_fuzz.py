"""Hypothesis: whatever a client sends, the converters answer a value or RequestRejected."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.status import RequestRejected
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from services.messaging import converters as c
from services.messaging.config import MessagingConfig

CFG = MessagingConfig(max_message_size=64, user_property_max_num=4, max_user_property_size=64)
text = st.text(max_size=80)
names = st.one_of(text, st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True))
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
seconds = st.integers(min_value=-10**11, max_value=10**11)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_rejections(fn, *args):
    try:
        fn(*args)
    except RequestRejected:
        pass


@st.composite
def messages(draw):
    system = d.SystemProperties(message_id=draw(text), message_type=draw(st.integers(0, 8)), body_encoding=draw(st.integers(0, 3)),
                                keys=draw(st.lists(text, max_size=3)), born_host=draw(text))
    if draw(st.booleans()):
        system.tag = draw(text)
    if draw(st.booleans()):
        system.message_group = draw(text)
    if draw(st.booleans()):
        system.delivery_timestamp.seconds = draw(st.integers(0, 10**10))
    if draw(st.booleans()):
        system.born_timestamp.seconds = draw(st.integers(-10**10, 10**10))
    message = d.Message(topic=d.Resource(name=draw(names)), body=draw(st.binary(max_size=100)), system_properties=system)
    for key, value in draw(st.dictionaries(text, text, max_size=6)).items():
        message.user_properties[key] = value
    return message


@FAST
@given(st.lists(messages(), max_size=3))
def test_send_never_raises_anything_else(batch):
    _only_rejections(c.send_items, s.SendMessageRequest(messages=batch), CFG, 1_700_000_000_000, "cid")


@FAST
@given(names, names, ints, ints, st.booleans(), st.one_of(st.none(), seconds), st.one_of(st.none(), seconds),
       st.integers(0, 5), text, st.one_of(st.none(), st.integers(-10**6, 10**8)))
def test_receive_never_raises_anything_else(group, topic, queue_id, batch, auto_renew, invisible, poll, ftype, expr, remaining):
    request = s.ReceiveMessageRequest(group=d.Resource(name=group), batch_size=batch, auto_renew=auto_renew,
                                      message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=queue_id),
                                      filter_expression=d.FilterExpression(type=ftype, expression=expr))
    if invisible is not None:
        request.invisible_duration.seconds = invisible
    if poll is not None:
        request.long_polling_timeout.seconds = poll
    _only_rejections(c.receive_request, request, CFG, "cid", 0, remaining)


@FAST
@given(names, names, st.lists(st.tuples(text, text), max_size=4), st.one_of(st.none(), seconds), text, st.integers(0, 4), st.integers(0, 3))
def test_handles_and_transactions_never_raise_anything_else(group, topic, entries, invisible, handle, resolution, source):
    ack = s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                              entries=[s.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in entries])
    _only_rejections(c.ack_entries, ack, CFG)
    change = s.ChangeInvisibleDurationRequest(group=d.Resource(name=group), topic=d.Resource(name=topic), receipt_handle=handle)
    if invisible is not None:
        change.invisible_duration.seconds = invisible
    _only_rejections(c.change_invisible, change, CFG)
    _only_rejections(c.forward_to_dlq, s.ForwardMessageToDeadLetterQueueRequest(group=d.Resource(name=group),
                                                                               topic=d.Resource(name=topic), receipt_handle=handle), CFG)
    _only_rejections(c.end_transaction, s.EndTransactionRequest(topic=d.Resource(name=topic), message_id=handle, transaction_id=handle,
                                                                resolution=resolution, source=source), CFG)
    _only_rejections(c.recall, s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=handle), CFG)


@FAST
@given(st.lists(st.tuples(text, st.one_of(text, st.binary(max_size=10))), max_size=6))
def test_client_context_never_raises_anything_else(metadata):
    _only_rejections(c.client_context, metadata)
