"""SendItem, the send path's message by its fields, and the record section made from them.

The plain send path encodes a message's system properties straight from a SendItem's fields
(``record.message_properties_section``), never making the dict that ``SendItem.properties``
and a draft hold; these say both give the same record bytes, for any fields.
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


def section_of(item: SendItem) -> bytes:
    return record.message_properties_section(item.message_id, item.tag, item.keys, item.message_type.value,
                                             item.message_group, item.delivery_timestamp_ms, item.other_properties)


@given(items)
def test_the_section_from_fields_is_the_section_of_the_items_properties(item):
    assert section_of(item) == record.encode_properties(item.properties())
    assert record.decode_properties(section_of(item)) == item.properties()


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


@given(st.dictionaries(text, text, max_size=5))
def test_properties_sections_round_trip(properties):
    assert record.decode_properties(record.encode_properties(properties)) == properties


@given(st.binary(max_size=64))
def test_a_section_that_is_not_one_is_a_value_error(data):
    try:
        record.decode_properties(data)
    except ValueError:
        pass
