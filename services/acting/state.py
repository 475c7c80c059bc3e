"""What one broker knows for the acting-master decisions, held between the drivers that learn it
(the member watch, the hand-over) and the broker that acts on it (``Broker.apply_role``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from ha.acting.special_services import MemberView, Reason


@dataclass
class ActingState:
    enabled: bool = False  # enableSlaveActingMaster
    view: MemberView | None = None  # the group's smallest live id, and when it was learned
    members: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))  # id -> internal address
    handover_done: bool = False  # a master: it took the special state back from the acting members
    last_handover_ms: int | None = None  # a slave: when it last handed over to a returning master
    bridge: object | None = None  # services.acting.escape.EscapeBridge (the container gives it)
    reason: Reason | None = None  # the last special-service decision's reason (status)
    acted: bool = False  # ran the special services as a slave since this process started

    def status(self) -> dict:
        return {"enabled": self.enabled, "reason": self.reason.value if self.reason else None,
                "minBrokerId": self.view.min_broker_id if self.view else None,
                "viewLearnedMs": self.view.learned_ms if self.view else None,
                "members": {str(k): v for k, v in self.members.items()}, "handoverDone": self.handover_done,
                "acted": self.acted, "escaped": getattr(self.bridge, "escaped", 0)}
