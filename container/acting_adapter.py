"""The container as the ActingService sees it (``services.acting.service``): composition only."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from container.runtime import BrokerContainer


class ContainerActing:
    def __init__(self, container: "BrokerContainer"):
        self.container = container

    def acting_broker(self, broker_name: str, broker_id: int | None):
        """(broker, member watch) of the hosted member ``broker_id`` of ``broker_name``; with no
        id, of its master here.  None when there is none."""
        for hosted in self.container.hosted.values():
            if hosted.name != broker_name:
                continue
            if (hosted.is_master if broker_id is None else hosted.spec.broker.broker_id == broker_id):
                return hosted.broker, hosted.member_watch
        return None

    def offer_master(self, broker_name: str, broker_id: int, master_address: str):
        """A returning master of ``broker_name`` offers itself to the hosted member ``broker_id``
        (pre-online): the member's replication connects there when the nameserver names no
        master.  Returns the member's replication state; None when the member is not hosted;
        raises ``NotASlave`` when it is not a slave."""
        from services.acting.service import NotASlave

        for hosted in self.container.hosted.values():
            if hosted.name != broker_name or hosted.spec.broker.broker_id != broker_id:
                continue
            slave = hosted.replica.slave
            if hosted.replica.is_master or slave is None:
                raise NotASlave(f"{broker_name} member {broker_id} is {hosted.replica.role.value.lower()}, not a slave")
            return slave.offer_master(master_address)
        return None
