"""Puts the broker makes on its own behalf, and how store errors become statuses.

Rules:
- An internal re-put (transaction commit, timer delivery, retry, DLQ, pop log) must not be
  dropped by a transient store error (upstream #7709): it is retried ``internalPutRetries``
  times with ``internalPutRetryBackoffMs`` between tries; errors that cannot heal (message too
  large, store closed) are raised at once.
- :func:`rejection_for` is the one mapping from a store error to a user-facing status.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Sequence

from metadata.message import MessageDraft, StoredMessage
from metadata.status import Code, RequestRejected
from store.errors import StoreError, StoreErrorReason

log = logging.getLogger(__name__)

_PERMANENT = {StoreErrorReason.MESSAGE_TOO_LARGE, StoreErrorReason.BATCH_TOO_LARGE, StoreErrorReason.STORE_CLOSED,
              StoreErrorReason.NOT_WRITABLE}
_CODES = {
    StoreErrorReason.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    StoreErrorReason.MESSAGE_TOO_LARGE: Code.MESSAGE_BODY_TOO_LARGE,
    StoreErrorReason.BATCH_TOO_LARGE: Code.PAYLOAD_TOO_LARGE,
    StoreErrorReason.NOT_WRITABLE: Code.HA_NOT_AVAILABLE,
    StoreErrorReason.DISK_FULL: Code.INTERNAL_SERVER_ERROR,   # "store: DISK_FULL: ...": the client tries elsewhere
    StoreErrorReason.IO_ERROR: Code.INTERNAL_SERVER_ERROR,
}


_NAMED = {StoreErrorReason.DISK_FULL, StoreErrorReason.IO_ERROR}   # a code shared with bugs: the message says which


def rejection_for(error: StoreError) -> RequestRejected:
    named = f"{error.reason.value}: " if error.reason in _NAMED else ""
    return RequestRejected(_CODES.get(error.reason, Code.INTERNAL_SERVER_ERROR), f"store: {named}{error.message}")


async def put_retrying(store, drafts: Sequence[MessageDraft], retries: int, backoff_ms: int, what: str) -> list[StoredMessage]:
    attempt = 0
    while True:
        try:
            return await store.put(drafts)
        except StoreError as error:
            if error.reason in _PERMANENT or attempt >= retries:
                raise
            attempt += 1
            log.warning("%s: put failed (%s), retry %d of %d", what, error, attempt, retries)
            await asyncio.sleep(backoff_ms / 1000)
