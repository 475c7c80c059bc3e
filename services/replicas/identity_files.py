"""The ``brokerIdentity`` files of a store (ha.role.identity says what they mean).

Rules: both live in the store's root; writes are atomic and durable (tmp, fsync, rename,
fsync of the directory), so a crash leaves the old content or the new, never a torn file;
deleting the temp file fsyncs the directory too.  A file that cannot be read is reported,
not guessed at.
"""
from __future__ import annotations

import os
from pathlib import Path

from ha.role.identity import IDENTITY_FILE, TEMP_FILE
from services.broker.config_files import write_atomically


class IdentityFiles:
    def __init__(self, root: Path):
        self.identity_path = Path(root) / IDENTITY_FILE
        self.temp_path = Path(root) / TEMP_FILE

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            return path.read_text("utf-8")
        except FileNotFoundError:
            return None

    def read_identity(self) -> str | None:
        return self._read(self.identity_path)

    def read_temp(self) -> str | None:
        return self._read(self.temp_path)

    def write_identity(self, text: str) -> None:
        write_atomically(self.identity_path, text + "\n")

    def write_temp(self, text: str) -> None:
        write_atomically(self.temp_path, text + "\n")

    def delete_temp(self) -> None:
        for path in (self.temp_path, self.temp_path.with_name(self.temp_path.name + ".bak")):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        fd = os.open(self.temp_path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
