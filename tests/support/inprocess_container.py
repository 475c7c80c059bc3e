"""A real BrokerContainer (and optionally a controller) running on a background event loop of
the test process, so a test can watch its log records and metrics registry directly.

Built exactly as ``relaymq container`` builds it (``container.cli_container.build_container``
on a TOML file with free loopback ports); ``stop()`` stops it as SIGTERM would.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from tests.support.container_process import ContainerProcess


class BackgroundLoop:
    def __init__(self, uvloop: bool = False):
        """``uvloop``: the loop the container runs on in production (``relaymq container``)."""
        if uvloop:
            import uvloop as uv
            self.loop = uv.new_event_loop()
        else:
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine, timeout_s: float = 60):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class InProcessContainer:
    """One container with an embedded nameserver and broker-a (master), on loopback."""

    def __init__(self, data_dir: Path, extra: dict | None = None, brokers: list[dict] | None = None,
                 namesrv_port: int = 0, uvloop: bool = False):
        """``namesrv_port`` given: no embedded nameserver; register with the one on that port."""
        from container.cli_container import build_container

        self.spec = ContainerProcess(data_dir, brokers=brokers or [{"brokerName": "broker-a"}],
                                     extra={"haListenPort": 0, **(extra or {})}, embedded_namesrv=not namesrv_port,
                                     namesrv_port=namesrv_port)
        self.container = build_container(str(self.spec.write_config()), None)
        self.background = BackgroundLoop(uvloop)
        self.background.run(self.container.start())

    @property
    def client(self) -> str:
        return f"127.0.0.1:{self.container.ports['client']}"

    @property
    def admin(self) -> str:
        return f"127.0.0.1:{self.container.ports['admin']}"

    @property
    def namesrv(self) -> str:
        return self.spec.namesrv

    def stop(self) -> None:
        self.background.run(self.container.stop())
        self.background.close()


class InProcessController:
    """One standalone single-member controller (its own gRPC server) on loopback."""

    def __init__(self, store: Path, port: int):
        from services.controller.config import controller_config
        from services.controller.server import start_controller

        self.config = controller_config({"controllerDLegerPeers": f"n0-127.0.0.1:{port}", "controllerDLegerSelfId": "n0",
                                         "controllerStorePath": str(store)}, "test")
        self.background = BackgroundLoop()
        self.handle = self.background.run(start_controller(self.config))
        self.address = f"127.0.0.1:{self.handle.port}"

    def stop(self) -> None:
        self.background.run(self.handle.stop())
        self.background.close()


class Tracebacks(logging.Handler):
    """Collects every log record that carries a traceback (ours or grpc's)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.exc_text or "Traceback" in record.getMessage():
            self.records.append(record)
        if record.levelno >= logging.WARNING:
            self.warnings.append(record.getMessage())

    def __enter__(self) -> "Tracebacks":
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)
