"""What the admin service needs from the container that serves it (implemented by the lead).

Rules:
- ``brokers()`` maps each hosted broker's name to its :class:`BrokerAdminApi`.
- ``add_broker(config_path)`` reads the broker file on the container's host, adds and starts
  the broker, and returns its canonical name (``cluster_brokerName_brokerId``).  It raises
  :class:`AddBrokerError` with RocketMQ's message (reference section 1.3) when it refuses or
  the start fails (the broker is then removed again).
- ``remove_broker`` raises :class:`BrokerNotExistError` for an unknown identity.
- ``container_status()`` is a JSON-serialisable mapping.
- ``clients()`` lists the clients of the container's client endpoint (``ClientInfo``).
- ``broker_config(name, id)`` is (the file it came from, every (key, value, unit, live));
  ``update_broker_config(name, id, changes)`` applies live keys (``services.broker.live_config``)
  and returns the changed entries, or raises ``NotLive`` / ``ConfigError``.
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from services.broker.admin_api import BrokerAdminApi
from services.messaging.client_registry import ClientInfo


class ContainerAdminError(Exception):
    """A container admin operation was refused; the message is for the user."""


class AddBrokerError(ContainerAdminError):
    pass


class BrokerNotExistError(ContainerAdminError):
    def __init__(self, message: str = "Broker not exist"):
        super().__init__(message)


class ContainerAdminApi(Protocol):
    def brokers(self) -> Mapping[str, BrokerAdminApi]: ...

    async def add_broker(self, config_path: str) -> str: ...

    async def remove_broker(self, cluster: str, broker_name: str, broker_id: int) -> None: ...

    def container_status(self) -> Mapping[str, object]: ...

    def clients(self) -> Sequence["ClientInfo"]: ...

    def broker_config(self, broker_name: str, broker_id: int) -> tuple[str, list[tuple[str, str, str, bool]]]: ...

    def update_broker_config(self, broker_name: str, broker_id: int,
                             changes: Mapping[str, str]) -> list[tuple[str, str, str, bool]]: ...
