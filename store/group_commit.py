"""When and where a SYNC_FLUSH group commit runs its fdatasync (a pure policy; store.flush drives it).

Why: on this kind of VM an fdatasync costs 55-110 us of CPU and each commit's round trip
through the event loop and gRPC costs more again, so sixteen sends in flight that each get
their own fdatasync spend a third more CPU per message than with ASYNC_FLUSH
(docs/performance.md).  Two decisions cut that; :meth:`GroupCommit.observe_sync` and
:meth:`GroupCommit.observe_window` take what was measured, the properties answer.

*When* (PostgreSQL's ``commit_delay``, which waits only while other transactions run):

* The first put of a group opens a *window*: the fdatasync waits ``window_s``
  (``groupCommitWindowMicros``) for more puts to share it, then syncs them all.
* Only while enough messages come together: a window that gathered fewer than
  ``MIN_COMPANY`` messages was a wait for too little (one or two producers, each with one
  message in flight), so the next ``SKIP_AFTER_EMPTY`` groups sync at once, twice as many
  after each further such wait, up to ``SKIP_MOST``; a group that finds ``MIN_COMPANY`` or
  more messages there shows company again, and the next group waits.  A lone producer soon
  pays ``window_s`` once in ``SKIP_MOST`` sends.  Two producers of single messages lose more
  by waiting for each other (their syncs no longer overlap their round trips) than they save
  in syncs: 530-580 msg/s when their groups waited, 1,530-1,980 syncing at once
  (docs/performance.md).  Messages, not puts: two batches of 32 are company enough (sixteen
  batches in flight often fill a window with two, and counted as puts they backed off).

*Where*:

* On the event loop, a sync costs no hand-off: no wake of the flush thread, no report sent
  back.  But the loop serves nothing while the disk syncs, so it syncs only while the disk
  is fast: it starts on the thread; ``FAST_IN_A_ROW`` thread syncs in a row of at most
  ``FAST_S`` move it to the loop; one loop sync over ``FAST_S`` moves it back at once, so a
  slow or stalled disk (a full journal, a noisy neighbour, a failing device) stalls the loop
  for one sync, never two in a row.
"""
from __future__ import annotations

FAST_S = 0.002
FAST_IN_A_ROW = 8
SKIP_AFTER_EMPTY = 16
SKIP_MOST = 1024
MIN_COMPANY = 3


class GroupCommit:
    def __init__(self, *, window_s: float, on_loop: bool = True, fast_s: float = FAST_S,
                 fast_in_a_row: int = FAST_IN_A_ROW, skip_after_empty: int = SKIP_AFTER_EMPTY,
                 skip_most: int = SKIP_MOST, min_company: int = MIN_COMPANY):
        self._window_s = window_s
        self._allowed = on_loop
        self._fast_s = fast_s
        self._needed = fast_in_a_row
        self._skip_after_empty = skip_after_empty
        self._skip_most = skip_most
        self._min_company = min_company
        self._backoff = skip_after_empty  # groups to skip after the next wait for nothing
        self.inline = False   # the next sync runs on the event loop
        self._fast = 0        # thread syncs in a row of at most fast_s
        self._skip = 0        # groups still to sync at once after a window that gathered too few messages

    @property
    def window_s(self) -> float:
        """How long the group now opening waits for company before its fdatasync."""
        return self._window_s if self._skip == 0 else 0.0

    def observe_window(self, messages: int, waited: bool) -> None:
        """A group ended with puts of ``messages`` messages in it; it waited its window or synced at once."""
        if waited and messages < self._min_company:
            self._skip = self._backoff
            self._backoff = min(2 * self._backoff, self._skip_most)
        elif messages >= self._min_company:
            self._skip, self._backoff = 0, self._skip_after_empty
        elif self._skip:
            self._skip -= 1

    def observe_sync(self, seconds: float, *, inline: bool) -> None:
        """An fdatasync took ``seconds``, on the loop (``inline``) or on the flush thread."""
        if seconds > self._fast_s:
            self.inline, self._fast = False, 0
        elif not inline:
            self._fast += 1
            if self._allowed and self._fast >= self._needed:
                self.inline = True
