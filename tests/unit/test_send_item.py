"""SendItem, the send path's message by its fields, and the record section made from them.

The plain send path encodes a message's record straight from a SendItem's fields
(``record.encode_item_tail``), never making the draft and properties dict that
``SendItem.draft`` holds; these say both give the same record bytes, for any fields.
"""
from hypothesis import given, strategies as st

from metadata.message import MessageDraft, MessageType, Prop
from services.broker.api import SendItem
from store import record

text = st.text(max_size=12)
present = st.none() | st.text(min_size=1, max_size=12)
reserved = (Prop.MESSAGE_ID, Prop.TAG, Prop.KEYS, Prop.MESSAGE_TYPE, Prop.MESSAGE_GROUP, Prop.DELIVERY_TIME_MS)
others = st.dictionaries(text.filter(lambda key: key not in reserved), text, max_size=3)
items = st.builds(
    SendItem, topic=st.text(min_size=1, max_size=20), body=st.binary(max_size=50),
    born_timestamp_ms=st.integers(0, 2**62), born_host=text, message_id=text, tag=present, keys=present,
    message_type=st.sampled_from(list(MessageType)), message_group=present,
    delivery_timestamp_ms=st.none() | st.integers(0, 2**62), user_properties=st.dictionaries(text, text, max_size=3),
    producer_client_id=text, other_properties=others)


@given(items)
def test_the_tail_from_fields_is_the_tail_of_the_items_draft(item):
    assert record.encode_item_tail(item) == record.encode_tail(item.draft)


@given(items)
def test_an_item_is_the_same_message_as_its_draft(item):
    again = SendItem.of(item.draft, item.message_type, item.message_group, item.delivery_timestamp_ms,
                        item.producer_client_id)
    assert again == item
    assert again.draft == item.draft and item.draft.queue_id == -1


def test_a_drafts_own_type_group_and_delivery_time_give_way_to_the_items():
    draft = MessageDraft("T", 3, b"x", 5, properties={Prop.MESSAGE_ID: "M", Prop.MESSAGE_TYPE: "DELAY",
                                                      Prop.DELIVERY_TIME_MS: "1", "custom": "v"})
    item = SendItem.of(draft, MessageType.FIFO, "g")
    assert item.properties() == {Prop.MESSAGE_ID: "M", Prop.MESSAGE_TYPE: "FIFO", Prop.MESSAGE_GROUP: "g",
                                 "custom": "v"}
