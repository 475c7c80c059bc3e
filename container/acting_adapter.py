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
