"""Checking, before anything starts, that every port the process needs is free.

grpcio reports a busy port late and vaguely; checking first lets the container refuse to
start with one line naming the port and its config key, having touched no data.
"""
from __future__ import annotations

import errno
import socket

from metadata.config import ConfigError


def check_ports_free(where: str, ports: list[tuple[str, str, int]]) -> None:
    """``ports``: (config key, bind host, port); port 0 means "any" and is skipped."""
    for key, host, port in ports:
        if port == 0:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ConfigError(where, key, f"port {port} on {host} is already in use") from None
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise ConfigError(where, key, f"address {host} is not an address of this machine") from None
                raise ConfigError(where, key, f"cannot bind {host}:{port} ({exc.strerror})") from None
