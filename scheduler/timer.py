"""Delay/timer messages: the pure due-time index and the recall handle codec.

Rules:
- A delayed message is stored in ``rmq_sys_wheel_timer`` (queue 0) with its real topic and
  queue in properties; the index maps its timer offset to its due time.  Entries are added
  only by scanning that topic in order (``scan_offset``: every record below it is indexed),
  and removed only by applying op records of ``rmq_sys_timer_op`` in order (``op_offset``).
  The timer service writes the op (delivered / cancelled) in the same put as the re-put
  message, so a delivery and its op are durable together and replaying ops over a
  checkpoint never delivers twice.
- Ops are applied after the scan has caught up, so an op never precedes its entry; an op for
  an offset that is not pending is ignored (idempotent replay).
- ``due(now_ms, limit)`` lists pending entries with due time <= now in due order.
"""
from __future__ import annotations

import base64
import binascii
import heapq
from dataclasses import dataclass
from typing import Any

from metadata.names import is_valid_topic_name

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_OP_TOPIC = "rmq_sys_timer_op"


@dataclass(frozen=True)
class RecallHandle:
    topic: str
    timer_offset: int
    message_id: str

    def encode(self) -> str:
        raw = f"{self.topic}|{self.timer_offset}|{self.message_id}".encode()
        return "r1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_recall_handle(text: object) -> RecallHandle | None:
    if not isinstance(text, str) or not text.startswith("r1.") or len(text) > 1024:
        return None
    body = text[3:]
    try:
        fields = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode().split("|")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if len(fields) != 3 or not is_valid_topic_name(fields[0]) or not fields[1].isascii() or not fields[1].isdigit():
        return None
    return RecallHandle(fields[0], int(fields[1]), fields[2])


class TimerIndex:
    def __init__(self) -> None:
        self.pending: dict[int, int] = {}  # timer offset -> due ms
        self._heap: list[tuple[int, int]] = []
        self.scan_offset = 0
        self.op_offset = 0

    def add(self, timer_offset: int, due_ms: int) -> None:
        if timer_offset in self.pending:
            return
        self.pending[timer_offset] = due_ms
        heapq.heappush(self._heap, (due_ms, timer_offset))

    def resolve(self, timer_offset: int) -> bool:
        """Delivered or cancelled; True when it was pending."""
        return self.pending.pop(timer_offset, None) is not None

    def is_pending(self, timer_offset: int) -> bool:
        return timer_offset in self.pending

    def due(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """Pending (timer offset, due ms) with due <= now, earliest first."""
        found: list[tuple[int, int]] = []
        while self._heap and self._heap[0][0] <= now_ms and len(found) < limit:
            due_ms, offset = heapq.heappop(self._heap)
            if self.pending.get(offset) == due_ms:
                found.append((offset, due_ms))
        for item in found:  # still pending until resolved: keep them findable
            heapq.heappush(self._heap, item[::-1])
        return found

    def next_due_ms(self) -> int | None:
        while self._heap and self.pending.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def to_document(self) -> dict[str, Any]:
        return {"scanOffset": self.scan_offset, "opOffset": self.op_offset, "pending": dict(self.pending)}

    @classmethod
    def from_document(cls, document: Any) -> "TimerIndex":
        index = cls()
        index.scan_offset = int(document.get("scanOffset", 0))
        index.op_offset = int(document.get("opOffset", 0))
        for offset, due_ms in (document.get("pending") or {}).items():
            index.add(int(offset), int(due_ms))
        return index
