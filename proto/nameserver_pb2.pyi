from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NameserverDataVersion(_message.Message):
    __slots__ = ("state_version", "timestamp_ms", "counter")
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    state_version: int
    timestamp_ms: int
    counter: int
    def __init__(self, state_version: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., counter: _Optional[int] = ...) -> None: ...

class NameserverBrokerIdentity(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_id: int
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class NameserverTopicConfig(_message.Message):
    __slots__ = ("topic", "read_queue_nums", "write_queue_nums", "perm", "message_type", "order")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    order: bool
    def __init__(self, topic: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[str] = ..., order: _Optional[bool] = ...) -> None: ...

class NameserverRegisterBrokerRequest(_message.Message):
    __slots__ = ("broker", "address", "client_endpoint", "topics", "topics_version", "heartbeat_timeout_ms", "enable_acting_master", "tls_client_endpoint", "broker_endpoint")
    BROKER_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_VERSION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    TLS_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker: NameserverBrokerIdentity
    address: str
    client_endpoint: str
    topics: _containers.RepeatedCompositeFieldContainer[NameserverTopicConfig]
    topics_version: NameserverDataVersion
    heartbeat_timeout_ms: int
    enable_acting_master: bool
    tls_client_endpoint: str
    broker_endpoint: str
    def __init__(self, broker: _Optional[_Union[NameserverBrokerIdentity, _Mapping]] = ..., address: _Optional[str] = ..., client_endpoint: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[NameserverTopicConfig, _Mapping]]] = ..., topics_version: _Optional[_Union[NameserverDataVersion, _Mapping]] = ..., heartbeat_timeout_ms: _Optional[int] = ..., enable_acting_master: _Optional[bool] = ..., tls_client_endpoint: _Optional[str] = ..., broker_endpoint: _Optional[str] = ...) -> None: ...

class NameserverRegisterBrokerResponse(_message.Message):
    __slots__ = ("master_address",)
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    master_address: str
    def __init__(self, master_address: _Optional[str] = ...) -> None: ...

class NameserverUnregisterBrokerRequest(_message.Message):
    __slots__ = ("broker", "address", "state_version")
    BROKER_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker: NameserverBrokerIdentity
    address: str
    state_version: int
    def __init__(self, broker: _Optional[_Union[NameserverBrokerIdentity, _Mapping]] = ..., address: _Optional[str] = ..., state_version: _Optional[int] = ...) -> None: ...

class NameserverUnregisterBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NameserverBrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker", "topics_version")
    BROKER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker: NameserverBrokerIdentity
    topics_version: NameserverDataVersion
    def __init__(self, broker: _Optional[_Union[NameserverBrokerIdentity, _Mapping]] = ..., topics_version: _Optional[_Union[NameserverDataVersion, _Mapping]] = ...) -> None: ...

class NameserverBrokerHeartbeatResponse(_message.Message):
    __slots__ = ("registration_needed",)
    REGISTRATION_NEEDED_FIELD_NUMBER: _ClassVar[int]
    registration_needed: bool
    def __init__(self, registration_needed: _Optional[bool] = ...) -> None: ...

class NameserverQueryRouteRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class NameserverBrokerAddress(_message.Message):
    __slots__ = ("broker_id", "address", "client_endpoint", "tls_client_endpoint", "broker_endpoint")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    TLS_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    client_endpoint: str
    tls_client_endpoint: str
    broker_endpoint: str
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., client_endpoint: _Optional[str] = ..., tls_client_endpoint: _Optional[str] = ..., broker_endpoint: _Optional[str] = ...) -> None: ...

class NameserverBrokerRoute(_message.Message):
    __slots__ = ("cluster", "broker_name", "members", "read_queue_nums", "write_queue_nums", "perm", "message_type", "enable_acting_master")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    members: _containers.RepeatedCompositeFieldContainer[NameserverBrokerAddress]
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    enable_acting_master: bool
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[NameserverBrokerAddress, _Mapping]]] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[str] = ..., enable_acting_master: _Optional[bool] = ...) -> None: ...

class NameserverQueryRouteResponse(_message.Message):
    __slots__ = ("topic", "brokers")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    brokers: _containers.RepeatedCompositeFieldContainer[NameserverBrokerRoute]
    def __init__(self, topic: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[NameserverBrokerRoute, _Mapping]]] = ...) -> None: ...

class NameserverGetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NameserverBrokerMember(_message.Message):
    __slots__ = ("broker_id", "address", "client_endpoint", "last_heartbeat_ms", "heartbeat_timeout_ms", "topics_version", "topic_count", "tls_client_endpoint", "broker_endpoint")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    TLS_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    client_endpoint: str
    last_heartbeat_ms: int
    heartbeat_timeout_ms: int
    topics_version: NameserverDataVersion
    topic_count: int
    tls_client_endpoint: str
    broker_endpoint: str
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., client_endpoint: _Optional[str] = ..., last_heartbeat_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., topics_version: _Optional[_Union[NameserverDataVersion, _Mapping]] = ..., topic_count: _Optional[int] = ..., tls_client_endpoint: _Optional[str] = ..., broker_endpoint: _Optional[str] = ...) -> None: ...

class NameserverBrokerGroup(_message.Message):
    __slots__ = ("cluster", "broker_name", "members", "enable_acting_master")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    members: _containers.RepeatedCompositeFieldContainer[NameserverBrokerMember]
    enable_acting_master: bool
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[NameserverBrokerMember, _Mapping]]] = ..., enable_acting_master: _Optional[bool] = ...) -> None: ...

class NameserverGetClusterInfoResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[NameserverBrokerGroup]
    def __init__(self, groups: _Optional[_Iterable[_Union[NameserverBrokerGroup, _Mapping]]] = ...) -> None: ...

class NameserverGetBrokerMemberGroupRequest(_message.Message):
    __slots__ = ("cluster", "broker_name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class NameserverBrokerMemberGroupMember(_message.Message):
    __slots__ = ("broker_id", "address")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class NameserverGetBrokerMemberGroupResponse(_message.Message):
    __slots__ = ("cluster", "broker_name", "members", "enable_acting_master")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ACTING_MASTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    members: _containers.RepeatedCompositeFieldContainer[NameserverBrokerMemberGroupMember]
    enable_acting_master: bool
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[NameserverBrokerMemberGroupMember, _Mapping]]] = ..., enable_acting_master: _Optional[bool] = ...) -> None: ...
