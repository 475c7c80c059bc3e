"""Run a real standalone ``relaymq namesrv`` process for tests (free port, SIGTERM/SIGKILL)."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class NameserverProcess:
    def __init__(self, config_path: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "container", "namesrv", "-c", str(config_path)], cwd=ROOT,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()  # blocks until ready or exit
        match = re.search(r"listening on (\S+)", line)
        if not match:
            self.process.kill()
            raise AssertionError(f"nameserver did not start: {line!r} {self.process.stderr.read()}")
        self.address = match.group(1)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_nameserver(directory: Path, text: str = "listenPort=0\nscanNotActiveBrokerInterval=100\n") -> NameserverProcess:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "namesrv.properties"
    path.write_text(text)
    return NameserverProcess(path)
