"""The checks a container makes before adding a broker at runtime (reference sections 1.1-1.3).

Pure: the broker file's keys and the identities already hosted in, a claim or a named
refusal out.  Messages are RocketMQ's where it has one, so operators recognise them:

- empty path -> "addBroker config path is empty"
- unreadable or empty file -> "addBroker properties empty"
- not controller mode: a master role forces ``brokerId=0``; a slave with ``brokerId <= 0`` ->
  "slave broker id must be > 0"
- ``totalReplicas < inSyncReplicas``, ``totalReplicas < minInSyncReplicas`` or
  ``inSyncReplicas < minInSyncReplicas`` -> "invalid replicas number"
- ``duplicationEnable=true`` and DLedger commit logs are refused (ours: not supported)
- an identity already hosted -> "<canonical name> has already been added to current broker container"
  (in controller mode ids are assigned later, so the check is on cluster and broker name).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Mapping

from metadata.names import is_valid_topic_name

ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
DEFAULT_CLUSTER = "DefaultCluster"


class AddBrokerRefusal(str, Enum):
    CONFIG_PATH_EMPTY = "CONFIG_PATH_EMPTY"
    PROPERTIES_EMPTY = "PROPERTIES_EMPTY"
    BAD_VALUE = "BAD_VALUE"
    SLAVE_BROKER_ID = "SLAVE_BROKER_ID"
    INVALID_REPLICAS = "INVALID_REPLICAS"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_ADDED = "ALREADY_ADDED"


@dataclass(frozen=True)
class AddBrokerRefused:
    reason: AddBrokerRefusal
    message: str


@dataclass(frozen=True)
class NewBrokerClaim:
    cluster: str
    broker_name: str
    broker_id: int
    role: str
    controller_mode: bool

    @property
    def canonical_name(self) -> str:
        return f"{self.cluster}_{self.broker_name}_{self.broker_id}"


class _Bad(ValueError):
    pass


def _bool(values: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = values.get(key, default)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise _Bad(f"{key}: {raw!r} is not a boolean (true or false)")


def _int(values: Mapping[str, Any], key: str, default: int) -> int:
    raw = values.get(key, default)
    if isinstance(raw, bool):
        raise _Bad(f"{key}: {raw!r} is not an integer")
    try:
        return int(str(raw).strip())
    except ValueError:
        raise _Bad(f"{key}: {raw!r} is not an integer") from None


def _name(values: Mapping[str, Any], key: str, default: str | None) -> str:
    raw = values.get(key, default)
    if raw is None:
        raise _Bad(f"{key} is required")
    name = str(raw).strip()
    if not is_valid_topic_name(name):
        raise _Bad(f"{key}: {name!r} must match [%|a-zA-Z0-9_-]+")
    return name


def check_config_path(config_path: str) -> AddBrokerRefused | None:
    if not config_path or not config_path.strip():
        return AddBrokerRefused(AddBrokerRefusal.CONFIG_PATH_EMPTY, "addBroker config path is empty")
    return None


def check_new_broker(values: Mapping[str, Any] | None,
                     hosted: Iterable[tuple[str, str, int]]) -> NewBrokerClaim | AddBrokerRefused:
    """``hosted``: (cluster, broker name, broker id) of every broker in the container."""
    if not values:
        return AddBrokerRefused(AddBrokerRefusal.PROPERTIES_EMPTY, "addBroker properties empty")
    try:
        claim = _claim(values)
    except _Bad as exc:
        return AddBrokerRefused(AddBrokerRefusal.BAD_VALUE, str(exc))
    if isinstance(claim, AddBrokerRefused):
        return claim
    for cluster, name, broker_id in hosted:
        same_group = cluster == claim.cluster and name == claim.broker_name
        if same_group and (claim.controller_mode or broker_id == claim.broker_id):
            return AddBrokerRefused(AddBrokerRefusal.ALREADY_ADDED,
                                    f"{claim.canonical_name} has already been added to current broker container")
    return claim


def _claim(values: Mapping[str, Any]) -> NewBrokerClaim | AddBrokerRefused:
    cluster = _name(values, "brokerClusterName", DEFAULT_CLUSTER)
    broker_name = _name(values, "brokerName", None)
    role = str(values.get("brokerRole", "ASYNC_MASTER")).strip().upper()
    if role not in ROLES:
        raise _Bad(f"brokerRole: {role!r} is not one of {', '.join(ROLES)}")
    controller_mode = _bool(values, "enableControllerMode", False)
    broker_id = _int(values, "brokerId", 0)
    if _bool(values, "duplicationEnable", False):
        return AddBrokerRefused(AddBrokerRefusal.UNSUPPORTED, "duplicationEnable=true is not supported")
    if _bool(values, "enableDLegerCommitLog", False):
        return AddBrokerRefused(AddBrokerRefusal.UNSUPPORTED, "enableDLegerCommitLog=true is not supported by RelayMQ")
    if not controller_mode:
        if role != "SLAVE":
            broker_id = 0
        elif broker_id <= 0:
            return AddBrokerRefused(AddBrokerRefusal.SLAVE_BROKER_ID, "slave broker id must be > 0")
    total = _int(values, "totalReplicas", 1)
    in_sync = _int(values, "inSyncReplicas", 1)
    min_in_sync = _int(values, "minInSyncReplicas", 1)
    if total < in_sync or total < min_in_sync or in_sync < min_in_sync:
        return AddBrokerRefused(AddBrokerRefusal.INVALID_REPLICAS, "invalid replicas number")
    return NewBrokerClaim(cluster, broker_name, broker_id, role, controller_mode)
