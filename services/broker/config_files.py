"""Atomic config files under ``{storePathRootDir}/config/`` (reference section 7).

Rules:
- A write goes to ``name.tmp``, is fsynced, the current file is kept as ``name.bak``
  (hard link, so the main file never disappears), the tmp is renamed over the main file and the
  directory is fsynced.  A crash at any point leaves either the old or the new content.
- A read uses the main file; when it is missing, empty or the parser rejects it, it falls
  back to ``name.bak``.  A parser error in both is raised to the caller (never guessed).
- Text is RocketMQ's fastjson dialect (``metadata.fastjson``): the caller passes a document.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from metadata import fastjson

log = logging.getLogger(__name__)
T = TypeVar("T")


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


def write_document(path: Path, document: Any) -> None:
    write_atomically(path, fastjson.dumps(document))


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
