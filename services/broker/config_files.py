"""Atomic config files under ``{storePathRootDir}/config/`` (reference section 7).

Rules:
- A write goes to ``name.tmp``, is fsynced, the current file is kept as ``name.bak``
  (hard link, so the main file never disappears), the tmp is renamed over the main file and the
  directory is fsynced.  A crash at any point leaves either the old or the new content.
- A read uses the main file; when it is missing, empty or the parser rejects it, it falls
  back to ``name.bak``.  A parser error in both is raised to the caller (never guessed).
- Text, by the file's name (:func:`document_text`): the files RocketMQ has too (topics.json,
  subscriptionGroup.json, consumerOffset.json) in its fastjson dialect (``metadata.fastjson``),
  byte-compatible with what Apache RocketMQ writes; RelayMQ's own state files (popState.json,
  timerCheckpoint.json, transactionCheckpoint.json, ...) as compact JSON by orjson.  The
  dialect's pretty print is Python: a pop table of 160,000 in-flight messages took 2.7 s of
  the event loop in it, every ``flushConsumerOffsetInterval``, against 13 ms in orjson
  (bench/bench_state_snapshot.py).  Both are read by ``fastjson.loads``.
- Writes of one path land in the order their documents were taken: a snapshot taken on the
  event loop and written later in a worker thread (:func:`snapshot_document`) is skipped when
  a later document of that path was written first, so an older table never overwrites a newer.
- A :class:`Deferred` document is made where it is written: by :func:`snapshot_document`'s
  write, in the worker thread (the event loop only copies what it holds), by
  :func:`write_document` at once.  Its order is still the moment it was handed in.
"""
from __future__ import annotations

import itertools
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

from metadata import fastjson

log = logging.getLogger(__name__)
T = TypeVar("T")
Write = Callable[[Path, Any], None]  # write_document, or a collector of snapshot_document's writes


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(text.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    if path.exists():
        bak = path.with_name(path.name + ".bak")
        bak_tmp = path.with_name(path.name + ".bak.tmp")
        if bak_tmp.exists():
            bak_tmp.unlink()
        os.link(path, bak_tmp)
        os.replace(bak_tmp, bak)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


_locks_lock = threading.Lock()
_path_locks: dict[Path, threading.Lock] = {}
_taken = itertools.count(1)          # the order documents were taken in (next() is atomic under the GIL)
_written: dict[Path, int] = {}       # path -> the order number of the document it holds


# the config files Apache RocketMQ has too: written in its dialect, so either broker reads them
ROCKETMQ_FILES = frozenset({"topics.json", "subscriptionGroup.json", "consumerOffset.json"})


class Deferred:
    """A document made by ``make()`` when its text is needed (see the module's rules)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def document_text(path: Path, document: Any) -> str:
    """``document`` as the text of the file at ``path`` (see the module's rules)."""
    if isinstance(document, Deferred):
        document = document.make()
    if path.name in ROCKETMQ_FILES:
        return fastjson.dumps(document)
    return orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS).decode()


def write_document(path: Path, document: Any) -> None:
    text = document_text(path, document)
    _write_in_order(path, lambda: text, next(_taken))


def snapshot_document(path: Path, document: Any) -> Callable[[], None]:
    """Serialize ``document`` now (a :class:`Deferred` one: in the write); return its write, to
    run later on any thread.  The write is skipped when a document of ``path`` taken after this
    one was written first."""
    order = next(_taken)
    if isinstance(document, Deferred):
        return lambda: _write_in_order(path, lambda: document_text(path, document), order)
    text = document_text(path, document)
    return lambda: _write_in_order(path, lambda: text, order)


def _write_in_order(path: Path, text: Callable[[], str], order: int) -> None:
    with _locks_lock:
        lock = _path_locks.setdefault(path, threading.Lock())
    with lock:
        if _written.get(path, 0) > order:
            return
        write_atomically(path, text())
        _written[path] = order


def read_document(path: Path, parse: Callable[[Any], T]) -> T | None:
    """Parse ``path`` (or its ``.bak``) with ``parse(document)``; None when neither exists."""
    errors: list[str] = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text("utf-8")
        except FileNotFoundError:
            continue
        if not text.strip():
            errors.append(f"{candidate.name}: empty")
            continue
        try:
            return parse(fastjson.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            errors.append(f"{candidate.name}: {exc}")
            log.warning("config file %s unreadable (%s); trying the backup", candidate, exc)
    if errors and any("empty" not in e for e in errors):
        raise ValueError(f"{path}: no readable copy: {'; '.join(errors)}")
    return None
