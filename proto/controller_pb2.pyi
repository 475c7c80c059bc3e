from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ControllerStatus(_message.Message):
    __slots__ = ("code", "remark", "leader_id", "leader_address")
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SUCCESS: _ClassVar[ControllerStatus.Code]
        SYSTEM_ERROR: _ClassVar[ControllerStatus.Code]
        CONTROLLER_FENCED_MASTER_EPOCH: _ClassVar[ControllerStatus.Code]
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: _ClassVar[ControllerStatus.Code]
        CONTROLLER_INVALID_MASTER: _ClassVar[ControllerStatus.Code]
        CONTROLLER_INVALID_REPLICAS: _ClassVar[ControllerStatus.Code]
        CONTROLLER_MASTER_NOT_AVAILABLE: _ClassVar[ControllerStatus.Code]
        CONTROLLER_INVALID_REQUEST: _ClassVar[ControllerStatus.Code]
        CONTROLLER_BROKER_NOT_ALIVE: _ClassVar[ControllerStatus.Code]
        CONTROLLER_NOT_LEADER: _ClassVar[ControllerStatus.Code]
        CONTROLLER_BROKER_METADATA_NOT_EXIST: _ClassVar[ControllerStatus.Code]
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA: _ClassVar[ControllerStatus.Code]
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: _ClassVar[ControllerStatus.Code]
        CONTROLLER_MASTER_STILL_EXIST: _ClassVar[ControllerStatus.Code]
        CONTROLLER_ELECT_MASTER_FAILED: _ClassVar[ControllerStatus.Code]
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: _ClassVar[ControllerStatus.Code]
        CONTROLLER_BROKER_ID_INVALID: _ClassVar[ControllerStatus.Code]
    SUCCESS: ControllerStatus.Code
    SYSTEM_ERROR: ControllerStatus.Code
    CONTROLLER_FENCED_MASTER_EPOCH: ControllerStatus.Code
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: ControllerStatus.Code
    CONTROLLER_INVALID_MASTER: ControllerStatus.Code
    CONTROLLER_INVALID_REPLICAS: ControllerStatus.Code
    CONTROLLER_MASTER_NOT_AVAILABLE: ControllerStatus.Code
    CONTROLLER_INVALID_REQUEST: ControllerStatus.Code
    CONTROLLER_BROKER_NOT_ALIVE: ControllerStatus.Code
    CONTROLLER_NOT_LEADER: ControllerStatus.Code
    CONTROLLER_BROKER_METADATA_NOT_EXIST: ControllerStatus.Code
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA: ControllerStatus.Code
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: ControllerStatus.Code
    CONTROLLER_MASTER_STILL_EXIST: ControllerStatus.Code
    CONTROLLER_ELECT_MASTER_FAILED: ControllerStatus.Code
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: ControllerStatus.Code
    CONTROLLER_BROKER_ID_INVALID: ControllerStatus.Code
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: ControllerStatus.Code
    remark: str
    leader_id: str
    leader_address: str
    def __init__(self, code: _Optional[_Union[ControllerStatus.Code, str]] = ..., remark: _Optional[str] = ..., leader_id: _Optional[str] = ..., leader_address: _Optional[str] = ...) -> None: ...

class ReplicaGroupView(_message.Message):
    __slots__ = ("broker_name", "master_broker_id", "master_address", "master_epoch", "sync_state_set_epoch", "sync_state_set", "members")
    class MembersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    members: _containers.ScalarMap[int, str]
    def __init__(self, broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Iterable[int]] = ..., members: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ReplicaStatusView(_message.Message):
    __slots__ = ("broker_id", "address", "alive", "in_sync")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    alive: bool
    in_sync: bool
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., alive: _Optional[bool] = ..., in_sync: _Optional[bool] = ...) -> None: ...

class ReplicaGroupDetail(_message.Message):
    __slots__ = ("view", "replicas")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    view: ReplicaGroupView
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaStatusView]
    def __init__(self, view: _Optional[_Union[ReplicaGroupView, _Mapping]] = ..., replicas: _Optional[_Iterable[_Union[ReplicaStatusView, _Mapping]]] = ...) -> None: ...

class GetNextBrokerIdRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class GetNextBrokerIdResponse(_message.Message):
    __slots__ = ("status", "next_broker_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    next_broker_id: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., next_broker_id: _Optional[int] = ...) -> None: ...

class ApplyBrokerIdRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "applied_broker_id", "register_check_code")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    APPLIED_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTER_CHECK_CODE_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., applied_broker_id: _Optional[int] = ..., register_check_code: _Optional[str] = ...) -> None: ...

class ApplyBrokerIdResponse(_message.Message):
    __slots__ = ("status", "broker_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    broker_id: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., broker_id: _Optional[int] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_address")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_address: _Optional[str] = ...) -> None: ...

class ControllerReplicaResponse(_message.Message):
    __slots__ = ("status", "view")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    view: ReplicaGroupView
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., view: _Optional[_Union[ReplicaGroupView, _Mapping]] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_address", "epoch", "max_offset", "confirm_offset", "heartbeat_timeout_ms", "election_priority")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ELECTION_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    epoch: int
    max_offset: int
    confirm_offset: int
    heartbeat_timeout_ms: int
    election_priority: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_address: _Optional[str] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., election_priority: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("status", "is_leader", "leader_address", "view")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    is_leader: bool
    leader_address: str
    view: ReplicaGroupView
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., is_leader: _Optional[bool] = ..., leader_address: _Optional[str] = ..., view: _Optional[_Union[ReplicaGroupView, _Mapping]] = ...) -> None: ...

class ElectMasterRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "designate_elect", "renew_master_epoch")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    DESIGNATE_ELECT_FIELD_NUMBER: _ClassVar[int]
    RENEW_MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    designate_elect: bool
    renew_master_epoch: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., designate_elect: _Optional[bool] = ..., renew_master_epoch: _Optional[int] = ...) -> None: ...

class AlterSyncStateSetRequest(_message.Message):
    __slots__ = ("broker_name", "master_broker_id", "master_epoch", "new_sync_state_set", "sync_state_set_epoch")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master_broker_id: int
    master_epoch: int
    new_sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    sync_state_set_epoch: int
    def __init__(self, broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_epoch: _Optional[int] = ..., new_sync_state_set: _Optional[_Iterable[int]] = ..., sync_state_set_epoch: _Optional[int] = ...) -> None: ...

class GetReplicaInfoRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class GetSyncStateDataRequest(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSyncStateDataResponse(_message.Message):
    __slots__ = ("status", "groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    groups: _containers.RepeatedCompositeFieldContainer[ReplicaGroupDetail]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., groups: _Optional[_Iterable[_Union[ReplicaGroupDetail, _Mapping]]] = ...) -> None: ...

class GetControllerMetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ControllerPeer(_message.Message):
    __slots__ = ("id", "address")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    address: str
    def __init__(self, id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class GetControllerMetadataResponse(_message.Message):
    __slots__ = ("status", "group", "self_id", "leader_id", "leader_address", "is_leader", "peers", "term", "commit_index")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SELF_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    group: str
    self_id: str
    leader_id: str
    leader_address: str
    is_leader: bool
    peers: _containers.RepeatedCompositeFieldContainer[ControllerPeer]
    term: int
    commit_index: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., group: _Optional[str] = ..., self_id: _Optional[str] = ..., leader_id: _Optional[str] = ..., leader_address: _Optional[str] = ..., is_leader: _Optional[bool] = ..., peers: _Optional[_Iterable[_Union[ControllerPeer, _Mapping]]] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ...) -> None: ...

class CleanBrokerDataRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_ids_to_clean", "clean_living_broker")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_IDS_TO_CLEAN_FIELD_NUMBER: _ClassVar[int]
    CLEAN_LIVING_BROKER_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_ids_to_clean: str
    clean_living_broker: bool
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_ids_to_clean: _Optional[str] = ..., clean_living_broker: _Optional[bool] = ...) -> None: ...

class CleanBrokerDataResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ...) -> None: ...

class WatchReplicaInfoRequest(_message.Message):
    __slots__ = ("broker_name", "cluster_name", "broker_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    cluster_name: str
    broker_id: int
    def __init__(self, broker_name: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class SyncAclRequest(_message.Message):
    __slots__ = ("origin", "version", "seed_document", "container", "brokers")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SEED_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    origin: str
    version: int
    seed_document: str
    container: str
    brokers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, origin: _Optional[str] = ..., version: _Optional[int] = ..., seed_document: _Optional[str] = ..., container: _Optional[str] = ..., brokers: _Optional[_Iterable[str]] = ...) -> None: ...

class SyncAclResponse(_message.Message):
    __slots__ = ("status", "origin", "version", "document", "seed_refused")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SEED_REFUSED_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    origin: str
    version: int
    document: str
    seed_refused: str
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., origin: _Optional[str] = ..., version: _Optional[int] = ..., document: _Optional[str] = ..., seed_refused: _Optional[str] = ...) -> None: ...

class ContainerBroker(_message.Message):
    __slots__ = ("name", "ownership_epoch", "entry_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNERSHIP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENTRY_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    ownership_epoch: int
    entry_json: str
    def __init__(self, name: _Optional[str] = ..., ownership_epoch: _Optional[int] = ..., entry_json: _Optional[str] = ...) -> None: ...

class ReportContainerRequest(_message.Message):
    __slots__ = ("endpoint", "admin_address", "brokers", "shared")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    admin_address: str
    brokers: _containers.RepeatedScalarFieldContainer[str]
    shared: _containers.RepeatedCompositeFieldContainer[ContainerBroker]
    def __init__(self, endpoint: _Optional[str] = ..., admin_address: _Optional[str] = ..., brokers: _Optional[_Iterable[str]] = ..., shared: _Optional[_Iterable[_Union[ContainerBroker, _Mapping]]] = ...) -> None: ...

class ReportContainerResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ...) -> None: ...

class MoveBrokerRequest(_message.Message):
    __slots__ = ("broker_name", "to", "execute")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    to: str
    execute: bool
    def __init__(self, broker_name: _Optional[str] = ..., to: _Optional[str] = ..., execute: _Optional[bool] = ...) -> None: ...

class MoveBrokerResponse(_message.Message):
    __slots__ = ("status", "refused", "move_json")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    MOVE_JSON_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    refused: str
    move_json: str
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., refused: _Optional[str] = ..., move_json: _Optional[str] = ...) -> None: ...

class CancelMoveRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class CancelMoveResponse(_message.Message):
    __slots__ = ("status", "refused", "move_json")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    MOVE_JSON_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    refused: str
    move_json: str
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., refused: _Optional[str] = ..., move_json: _Optional[str] = ...) -> None: ...

class ListMovesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListMovesResponse(_message.Message):
    __slots__ = ("status", "moves_json", "containers_json")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MOVES_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_JSON_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    moves_json: str
    containers_json: str
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., moves_json: _Optional[str] = ..., containers_json: _Optional[str] = ...) -> None: ...

class RaftEntry(_message.Message):
    __slots__ = ("term", "index", "data")
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    term: int
    index: int
    data: bytes
    def __init__(self, term: _Optional[int] = ..., index: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class RaftSnapshot(_message.Message):
    __slots__ = ("index", "term", "data", "peers")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    data: bytes
    peers: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., data: _Optional[bytes] = ..., peers: _Optional[_Iterable[int]] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("kind", "src", "dst", "term", "log_term", "index", "entries", "commit", "reject", "reject_reason", "hint", "hint_term", "snapshot", "group")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_REASON_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    HINT_TERM_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    kind: int
    src: int
    dst: int
    term: int
    log_term: int
    index: int
    entries: _containers.RepeatedCompositeFieldContainer[RaftEntry]
    commit: int
    reject: bool
    reject_reason: int
    hint: int
    hint_term: int
    snapshot: RaftSnapshot
    group: str
    def __init__(self, kind: _Optional[int] = ..., src: _Optional[int] = ..., dst: _Optional[int] = ..., term: _Optional[int] = ..., log_term: _Optional[int] = ..., index: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[RaftEntry, _Mapping]]] = ..., commit: _Optional[int] = ..., reject: _Optional[bool] = ..., reject_reason: _Optional[int] = ..., hint: _Optional[int] = ..., hint_term: _Optional[int] = ..., snapshot: _Optional[_Union[RaftSnapshot, _Mapping]] = ..., group: _Optional[str] = ...) -> None: ...

class RaftBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[RaftMessage, _Mapping]]] = ...) -> None: ...

class RaftAck(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
