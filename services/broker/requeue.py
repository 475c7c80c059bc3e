"""Copies the broker makes of a consumed message: retry, dead letter, and the view a consumer sees.

Rules (pure):
- A retry copy goes to the retry topic of (group, original topic) (``retry_topic_for``),
  queue 0, with RECONSUME_TIME = attempts used so far (so its next delivery attempt is that +
  1), RETRY_TOPIC = the original topic, and the same message id: only consumers of the
  original topic see it again.
- A dead-letter copy goes to ``%DLQ%<group>`` queue 0 with DLQ_ORIGIN_TOPIC and
  DLQ_ORIGIN_MESSAGE_ID.
- A consumer sees a retried message under its original topic.
"""
from __future__ import annotations

from dataclasses import replace

from metadata.message import MessageDraft, Prop, StoredMessage
from metadata.names import RETRY_PREFIX, dlq_topic, retry_topic_for


def origin_topic(message: StoredMessage) -> str:
    if message.topic.startswith(RETRY_PREFIX):
        return message.properties.get(Prop.RETRY_TOPIC, message.topic)
    return message.topic


def retry_draft(message: StoredMessage, group: str, attempts_used: int) -> MessageDraft:
    properties = dict(message.properties)
    properties[Prop.RECONSUME_TIMES] = str(attempts_used)
    origin = origin_topic(message)
    properties[Prop.RETRY_TOPIC] = origin
    properties.setdefault(Prop.ORIGIN_MESSAGE_ID, message.message_id)
    return message.draft.with_changes(topic=retry_topic_for(group, origin), queue_id=0, properties=properties)


def dead_letter_draft(message: StoredMessage, group: str, attempts_used: int) -> MessageDraft:
    properties = dict(message.properties)
    properties[Prop.RECONSUME_TIMES] = str(attempts_used)
    properties[Prop.DLQ_ORIGIN_TOPIC] = origin_topic(message)
    properties[Prop.DLQ_ORIGIN_MESSAGE_ID] = message.message_id
    return message.draft.with_changes(topic=dlq_topic(group), queue_id=0, properties=properties)


def consumer_view(message: StoredMessage) -> StoredMessage:
    topic = origin_topic(message)
    if topic == message.topic:
        return message
    return replace(message, draft=message.draft.with_changes(topic=topic))


def dead_letter_origin(message: StoredMessage) -> tuple[str, str] | None:
    topic = message.properties.get(Prop.DLQ_ORIGIN_TOPIC)
    if topic is None:
        return None
    return topic, message.properties.get(Prop.DLQ_ORIGIN_MESSAGE_ID, message.message_id)
