"""The container as the admin service sees it (``services.admin.container_api``)."""
from __future__ import annotations

from pathlib import Path
import dataclasses
from typing import TYPE_CHECKING, Mapping, Sequence

from container.config import BrokerEntry
from container.config_loader import load_config_file
from container.hosted_broker import bind_broker
from metadata.config import ConfigError
from services.admin.container_api import AddBrokerError, BrokerNotExistError
from services.broker.admin_api import BrokerAdminApi
from services.broker.live_config import config_entries, updated_config
from services.messaging.client_registry import ClientInfo

if TYPE_CHECKING:
    from container.runtime import BrokerContainer


class ContainerAdmin:
    def __init__(self, container: "BrokerContainer"):
        self.container = container

    def brokers(self) -> Mapping[str, BrokerAdminApi]:
        return {key: hosted.broker for key, hosted in self.container.hosted.items()}

    async def add_broker(self, config_path: str) -> str:
        if not config_path.strip():
            raise AddBrokerError("addBroker config path is empty")
        try:
            values = load_config_file(Path(config_path))
            if not values:
                raise AddBrokerError("addBroker properties empty")
            spec = bind_broker(BrokerEntry(values, config_path), self.container.config)
            hosted = await self.container.add_broker(spec)
        except ConfigError as exc:
            raise AddBrokerError(str(exc)) from None
        except AddBrokerError:
            raise
        except Exception as exc:  # reported to the operator, as upstream does
            raise AddBrokerError(f"start broker failed: {exc}") from None
        return hosted.spec.canonical_name

    async def remove_broker(self, cluster: str, broker_name: str, broker_id: int) -> None:
        if not await self.container.remove_broker(cluster, broker_name, broker_id):
            raise BrokerNotExistError()

    def clients(self) -> Sequence[ClientInfo]:
        registry = self.container.directory.registry
        return registry.snapshot() if registry is not None else []

    def _hosted(self, broker_name: str, broker_id: int):
        hosted = next((h for h in self.container.hosted.values() if h.name == broker_name and h.broker.broker_id == broker_id),
                      None)
        if hosted is None:
            raise BrokerNotExistError(f"Broker not exist: {broker_name} with brokerId {broker_id}")
        return hosted

    def broker_config(self, broker_name: str, broker_id: int) -> tuple[str, list[tuple[str, str, str, bool]]]:
        spec = self._hosted(broker_name, broker_id).spec
        return spec.where, config_entries(spec.broker, spec.store, spec.ha)

    def update_broker_config(self, broker_name: str, broker_id: int,
                             changes: Mapping[str, str]) -> list[tuple[str, str, str, bool]]:
        hosted = self._hosted(broker_name, broker_id)
        config = updated_config(hosted.spec.broker, changes, hosted.spec.where)
        hosted.broker.apply_config(config)
        hosted.spec = dataclasses.replace(hosted.spec, broker=config)
        return [entry for entry in config_entries(config) if entry[0] in changes]

    def container_status(self) -> Mapping[str, object]:
        ip, tls_port = self.container.config.broker_container_ip, self.container.ports.get("tls")
        return {
            "clientEndpoint": f"{ip}:{self.container.ports.get('client', 0)}",
            "tlsClientEndpoint": f"{ip}:{tls_port}" if tls_port else "",
            "brokers": sorted(h.spec.canonical_name for h in self.container.hosted.values()),
        }
