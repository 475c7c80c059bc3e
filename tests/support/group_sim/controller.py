"""The simulated controller: ha.controller's decide/apply, liveness and inactive-master scan.

Rules:

* The replicated tables survive a controller crash (Raft keeps them; the Raft cores have
  their own simulation); liveness and the brokers' watch sessions do not: a restarted
  controller is a new leader that waits one heartbeat timeout before it takes silence for
  death (``BrokerLiveness.settled``), as the service does.
* Requests arrive as messages and are decided one at a time against the applied tables;
  events are applied at once (committed), then the reply goes back and every watching broker
  gets the new view.  A broker's watch session ends when its process dies (the controller
  hears the connection close), and the controller takes that as the broker's death.
* Every applied ElectMaster is logged as (epoch, master): the history the invariants read.
"""
from __future__ import annotations

from dataclasses import dataclass

from ha.controller.commands import decide, group_view
from ha.controller.events import ApplyBrokerIdEvent, ElectMasterEvent
from ha.controller.liveness import BrokerLiveness, Heartbeat
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import ElectMaster, GroupView, Reply, Request
from ha.controller.scan import elections_needed

CLUSTER, GROUP = "sim", "broker-g"


@dataclass(frozen=True)
class Call:
    """A request to the controller; the reply goes back to ``src`` with ``tag``."""
    request: Request
    tag: str


@dataclass(frozen=True)
class Answer:
    tag: str
    reply: Reply


@dataclass(frozen=True)
class Watch:
    """The controller pushes a view to a watching broker."""
    view: GroupView


@dataclass(frozen=True)
class Beat:
    heartbeat: Heartbeat


class SimController:
    def __init__(self, broker_ids: tuple[int, ...], heartbeat_timeout_ms: int):
        self.replicas = ReplicasInfo()
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.liveness = BrokerLiveness(heartbeat_timeout_ms, 100)
        self.up = True
        self.watchers: dict[int, int] = {}   # broker id -> its watch connection
        self.elections: list[tuple[int, int | None]] = []   # (master epoch, master id) as applied
        for broker_id in broker_ids:
            self._apply_all((ApplyBrokerIdEvent(CLUSTER, GROUP, f"b{broker_id}", broker_id, f"b{broker_id};0"),))
        self.liveness.became_leader(0)

    @property
    def state(self):
        return self.replicas.sync_state_info_table[GROUP]

    def view(self) -> GroupView:
        return group_view(self.replicas, GROUP)

    def crash(self) -> None:
        self.up = False
        self.liveness = BrokerLiveness(self.heartbeat_timeout_ms, 100)
        self.watchers.clear()

    def restart(self, now_ms: int) -> None:
        self.up = True
        self.liveness.became_leader(now_ms)

    def _apply_all(self, events) -> bool:
        before = self.replicas.sync_state_info_table.get(GROUP)
        for event in events:
            self.replicas.apply(event)
            if isinstance(event, ElectMasterEvent):
                state = self.state
                self.elections.append((state.master_epoch, state.master_broker_id))
        return bool(events) and self.replicas.sync_state_info_table.get(GROUP) != before

    def handle(self, request: Request, now_ms: int) -> tuple[Reply, bool]:
        """Decide and apply; returns the reply and whether the group's view changed."""
        decision = decide(request, self.replicas.copy(), self.liveness, now_ms)
        changed = self._apply_all(decision.events)
        return decision.reply, changed

    def heartbeat(self, beat: Heartbeat, now_ms: int) -> None:
        self.liveness.heartbeat(beat, now_ms)

    def session_ended(self, broker_id: int, now_ms: int) -> None:
        self.watchers.pop(broker_id, None)
        self.liveness.session_ended(CLUSTER, GROUP, broker_id, now_ms)

    def scan(self, now_ms: int) -> bool:
        """Expire heartbeats and elect where the master is gone; whether the view changed."""
        for info in self.liveness.expire(now_ms):
            self.watchers.pop(info.broker_id, None)
        changed = False
        for request in elections_needed(self.replicas, self.liveness, now_ms):
            assert isinstance(request, ElectMaster)
            changed |= self.handle(request, now_ms)[1]
        return changed
