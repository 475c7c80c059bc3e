"""Looking up messages by id or key (``relaymq admin query-msg-by-id | query-msg-by-key``).

Rules:
- There is no message index yet: a lookup scans the topic's consume queues, newest first,
  reading at most ``max_scan`` messages in all (spread over the queues), and says whether it
  stopped early (``truncated``), so "not found" is never claimed for what was not read.
- A message matches by its id (``UNIQ_KEY``, the id the client protocol shows) or by one of
  its keys (``KEYS``, space-separated as upstream).
- The scan yields to the event loop between batches, so a long lookup does not stall sends.
- Slaves answer too (reads only); what a consumer could not read yet (past the confirm
  offset) is not read here either.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from metadata.message import Prop, StoredMessage

BATCH = 64


@dataclass(frozen=True)
class MessageMatch:
    """What to look for: exactly one of ``message_id`` and ``key``."""

    message_id: str = ""
    key: str = ""

    def __post_init__(self) -> None:
        assert bool(self.message_id) != bool(self.key), "exactly one of message_id and key"

    def matches(self, message: StoredMessage) -> bool:
        if self.message_id:
            return message.properties.get(Prop.MESSAGE_ID) == self.message_id
        return self.key in message.properties.get(Prop.KEYS, "").split(" ")


@dataclass(frozen=True)
class QueryResult:
    messages: tuple[StoredMessage, ...]
    scanned: int
    truncated: bool  # the scan stopped at max_scan before reading every message of the topic


def per_queue_budget(max_scan: int, queues: int) -> int:
    return max(1, max_scan // max(1, queues))


async def query_messages(store, topic: str, queue_ids: list[int], match: MessageMatch, max_scan: int,
                         max_results: int) -> QueryResult:
    """Scan each queue backwards from its newest message; stop at ``max_results`` matches."""
    found: list[StoredMessage] = []
    scanned, truncated = 0, False
    budget = per_queue_budget(max_scan, len(queue_ids))
    for queue_id in queue_ids:
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        end, read = high, 0
        while end > low and read < budget and len(found) < max_results:
            start = max(low, end - min(BATCH, budget - read))
            result = store.get(topic, queue_id, start, end - start)
            found += [m for m in reversed(result.messages) if match.matches(m)][:max_results - len(found)]
            read += end - start
            end = start
            await asyncio.sleep(0)
        scanned += read
        truncated = truncated or end > low
        if len(found) >= max_results:
            break
    return QueryResult(tuple(found), scanned, truncated)
