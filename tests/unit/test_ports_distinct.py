"""container/ports.py: two listeners of one process on one port are refused by name (gRPC binds
with SO_REUSEPORT, so the second bind succeeds and the kernel splits the connections)."""
from __future__ import annotations

import pytest

from container.ports import check_port_not_listened, check_ports_distinct
from metadata.config import ConfigError


def test_a_port_used_twice_in_one_container_config_is_refused_naming_both_keys():
    with pytest.raises(ConfigError, match="port 8081 is also grpcServerPort"):
        check_ports_distinct("c.toml", [("grpcServerPort", "0.0.0.0", 8081), ("listenPort", "127.0.0.1", 10911),
                                        ("listenPort of broker-a", "0.0.0.0", 8081)])
    check_ports_distinct("c.toml", [("grpcServerPort", "0.0.0.0", 0), ("haListenPort", "127.0.0.1", 0)])  # 0: any


def test_a_runtime_broker_port_must_not_be_one_the_container_listens_on():
    listening = {"client": 8081, "admin": 10911, "ha": 10912}
    with pytest.raises(ConfigError, match="port 8081 is already this container's client port"):
        check_port_not_listened("b.properties", "listenPort", 8081, listening)
    check_port_not_listened("b.properties", "listenPort", 8091, listening)
    check_port_not_listened("b.properties", "listenPort", 0, listening)
