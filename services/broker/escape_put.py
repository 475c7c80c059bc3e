"""A master storing what another group's acting slave escaped to it (RIP-32 EscapeBridge, the
target's side).

Rules:
- Only a writable master takes escaped messages (the caller checked its role and quorum).
- A retry copy goes to this broker's retry topic of (group, original topic), a dead-letter
  copy to ``%DLQ%<group>`` (both created on demand as system topics); a delay or transaction
  message to its real topic, which must exist here and be writable (else TOPIC_NOT_FOUND: the
  bridge picks another master).  The origin's queue id is mapped onto this topic's write
  queues (``queue_id % writeQueueNums``), so one origin queue's messages stay together.
- Escape keys are remembered in the send de-duplication window: a key stored before is
  answered with its first place and not stored again (an escape repeated after a lost reply).
- All new messages of a call are stored by one put (one write, one fsync), and the reply
  waits for the replicas like a send (SYNC_MASTER), so an escaped message is as durable as a
  sent one before the acting slave forgets it.
"""
from __future__ import annotations

from typing import Sequence

from ha.acting.escape_target import EscapeKind
from metadata.names import DLQ_PREFIX, RETRY_PREFIX
from metadata.status import Code, RequestRejected
from metadata.topic_config import PERM_WRITE
from services.acting.escape import EscapedItem, EscapedPlace
from services.broker.internal_put import rejection_for
from store.errors import StoreError

# escapes are remembered in the send de-duplication memory under "escape:<topic>", which no
# client's send can name (":" is not allowed in a topic name): a client's message id can never
# be answered with an escape's place
_DEDUPE_BUCKET = "escape:"


def _queue_of(broker, item: EscapedItem, now_ms: int) -> int:
    topic = item.draft.topic
    if item.kind in (EscapeKind.RETRY, EscapeKind.DEAD_LETTER) or topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        if not topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            raise RequestRejected(Code.BAD_REQUEST, f"a {item.kind.value} copy must go to a retry or DLQ topic, not {topic}")
        broker.topics.ensure_system_topic(topic, now_ms)
        return 0
    config = broker.topics.get(topic)
    if config is None or not config.perm & PERM_WRITE or config.write_queue_nums <= 0:
        raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} is not writable on broker {broker.name}")
    return item.draft.queue_id % config.write_queue_nums


async def escape_put(broker, items: Sequence[EscapedItem]) -> list[EscapedPlace]:
    now = broker.clock.now_ms()
    dedupe = broker.sender.current_outcomes()  # forgotten after a cut: a repeated escape is stored again
    places: list[EscapedPlace | None] = []
    drafts, fresh = [], []
    for index, item in enumerate(items):
        known = dedupe.lookup(_DEDUPE_BUCKET + item.draft.topic, item.key, now)
        if known is not None:
            places.append(EscapedPlace(broker.name, item.draft.topic, known[0], known[1]))
            continue
        places.append(None)
        drafts.append(item.draft.placed(_queue_of(broker, item, now)))
        fresh.append(index)
    if drafts:
        try:
            stored = await broker.store.put(drafts)
        except StoreError as error:
            raise rejection_for(error) from error
        for i, message in zip(fresh, stored):
            dedupe.remember(_DEDUPE_BUCKET + items[i].draft.topic, items[i].key, (message.queue_id, message.queue_offset),
                            now)
        for index, message in zip(fresh, stored):
            places[index] = EscapedPlace(broker.name, message.topic, message.queue_id, message.queue_offset)
        await broker.replication.wait_replicated(broker.store.commit_log_max_offset)
    return places
