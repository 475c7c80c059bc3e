"""The container as the backlog probe sees it (``services.messaging.backlog_probe``): composition only."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from container.runtime import BrokerContainer


class ContainerBacklog:
    def __init__(self, container: "BrokerContainer"):
        self.container = container

    def serving_pop(self, broker_name: str):
        """The pop service of the hosted broker ``broker_name`` that serves pop calls (master or acting)."""
        for hosted in self.container.hosted.values():
            if hosted.name == broker_name and hosted.broker.pop.serving():
                return hosted.broker.pop
        return None

    def wake(self, broker_name: str, topic: str) -> None:
        for hosted in self.container.hosted.values():
            if hosted.name == broker_name:
                hosted.broker.notifier.wake_every(topic)
