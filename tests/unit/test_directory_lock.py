"""The data-directory lock: one holder, a refusal naming the directory and the holder's pid."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store.directory_lock import DirectoryLocked, describe_holder, lock_directory


def test_second_lock_is_refused_naming_directory_and_pid(tmp_path):
    first = lock_directory(tmp_path / "store", "relaymq broker DefaultCluster_broker-a_0")
    with pytest.raises(DirectoryLocked) as refused:
        lock_directory(tmp_path / "store")
    message = str(refused.value)
    assert str(tmp_path / "store") in message
    assert f"process {os.getpid()} (relaymq broker DefaultCluster_broker-a_0)" in message
    assert "\n" not in message
    first.release()
    again = lock_directory(tmp_path / "store")
    assert again.held
    again.release()
    again.release()  # idempotent
    assert not again.held


def test_lock_of_another_process_and_its_death(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from store.directory_lock import lock_directory; "
        f"lock_directory({str(tmp_path)!r}, 'holder'); print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DirectoryLocked, match=f"process {holder.pid} \\(holder\\)"):
            lock_directory(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    lock_directory(tmp_path).release()  # SIGKILL released it: no stale lock


@pytest.mark.parametrize("text, phrase", [
    ("123 relaymq broker a\n", "process 123 (relaymq broker a)"),
    ("77\n", "process 77"),
    ("", "another process (its pid is not recorded yet)"),
    ("garbage", "another process (its pid is not recorded yet)"),
])
def test_describe_holder(text, phrase):
    assert describe_holder(text) == phrase
