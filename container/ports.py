"""Checking, before anything starts, that every port the process needs is free.

grpcio reports a busy port late and vaguely; checking first lets the container refuse to
start with one line naming the port and its config key, having touched no data.
A port is also checked against the process's own other listeners: gRPC binds with
SO_REUSEPORT, so a second server on a port this process already listens on is accepted and
the kernel splits connections between the two (a broker's listenPort equal to the client
port served half the clients' calls pinned to that broker).
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


def check_ports_distinct(where: str, ports: list[tuple[str, str, int]]) -> None:
    """No two of ``ports`` (config key, bind host, port) on one port; port 0 ("any") is skipped."""
    seen: dict[int, str] = {}
    for key, _, port in ports:
        if port and port in seen:
            raise ConfigError(where, key, f"port {port} is also {seen[port]}: two listeners of one process "
                                          "on one port (each needs a port of its own)")
        seen.setdefault(port, key)


def check_port_not_listened(where: str, key: str, port: int, listening: dict[str, int]) -> None:
    """``port`` is none of the ports this process already listens on (``listening``: name -> port)."""
    taken = next((name for name, bound in listening.items() if port and bound == port), None)
    if taken is not None:
        raise ConfigError(where, key, f"port {port} is already this container's {taken} port: two listeners of "
                                      "one process on one port (a broker's listenPort needs a port of its own)")
