from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActingNotifyMinBrokerIdRequest(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_id", "min_broker_id", "min_broker_address", "offline_broker_address")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_id: int
    min_broker_id: int
    min_broker_address: str
    offline_broker_address: str
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., min_broker_id: _Optional[int] = ..., min_broker_address: _Optional[str] = ..., offline_broker_address: _Optional[str] = ...) -> None: ...

class ActingNotifyMinBrokerIdResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ActingHandOverRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class ActingVersionedDocument(_message.Message):
    __slots__ = ("state_version", "timestamp_ms", "counter", "document_json")
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_JSON_FIELD_NUMBER: _ClassVar[int]
    state_version: int
    timestamp_ms: int
    counter: int
    document_json: bytes
    def __init__(self, state_version: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., counter: _Optional[int] = ..., document_json: _Optional[bytes] = ...) -> None: ...

class ActingHandOverResponse(_message.Message):
    __slots__ = ("acted", "timer", "transactions", "pop", "offsets")
    ACTED_FIELD_NUMBER: _ClassVar[int]
    TIMER_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    POP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    acted: bool
    timer: ActingVersionedDocument
    transactions: ActingVersionedDocument
    pop: ActingVersionedDocument
    offsets: ActingVersionedDocument
    def __init__(self, acted: _Optional[bool] = ..., timer: _Optional[_Union[ActingVersionedDocument, _Mapping]] = ..., transactions: _Optional[_Union[ActingVersionedDocument, _Mapping]] = ..., pop: _Optional[_Union[ActingVersionedDocument, _Mapping]] = ..., offsets: _Optional[_Union[ActingVersionedDocument, _Mapping]] = ...) -> None: ...

class ActingOfferMasterRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "master_address", "master_broker_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    master_address: str
    master_broker_id: int
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_broker_id: _Optional[int] = ...) -> None: ...

class ActingOfferMasterResponse(_message.Message):
    __slots__ = ("replication_state",)
    REPLICATION_STATE_FIELD_NUMBER: _ClassVar[int]
    replication_state: str
    def __init__(self, replication_state: _Optional[str] = ...) -> None: ...

class ActingEscapedMessage(_message.Message):
    __slots__ = ("topic", "queue_id", "body", "born_timestamp_ms", "born_host", "properties", "user_properties", "escape_key", "kind")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UserPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    USER_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    ESCAPE_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    body: bytes
    born_timestamp_ms: int
    born_host: str
    properties: _containers.ScalarMap[str, str]
    user_properties: _containers.ScalarMap[str, str]
    escape_key: str
    kind: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., body: _Optional[bytes] = ..., born_timestamp_ms: _Optional[int] = ..., born_host: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., user_properties: _Optional[_Mapping[str, str]] = ..., escape_key: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class ActingEscapePutRequest(_message.Message):
    __slots__ = ("broker_name", "messages")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    messages: _containers.RepeatedCompositeFieldContainer[ActingEscapedMessage]
    def __init__(self, broker_name: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ActingEscapedMessage, _Mapping]]] = ...) -> None: ...

class ActingEscapedPlace(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class ActingEscapePutResponse(_message.Message):
    __slots__ = ("places",)
    PLACES_FIELD_NUMBER: _ClassVar[int]
    places: _containers.RepeatedCompositeFieldContainer[ActingEscapedPlace]
    def __init__(self, places: _Optional[_Iterable[_Union[ActingEscapedPlace, _Mapping]]] = ...) -> None: ...

class ActingQueueKey(_message.Message):
    __slots__ = ("group", "topic", "queue_id")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    queue_id: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class ActingLockQueuesRequest(_message.Message):
    __slots__ = ("broker_name", "holder_id", "queues", "lease_ms", "unlock", "broker_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    UNLOCK_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    holder_id: int
    queues: _containers.RepeatedCompositeFieldContainer[ActingQueueKey]
    lease_ms: int
    unlock: bool
    broker_id: int
    def __init__(self, broker_name: _Optional[str] = ..., holder_id: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[ActingQueueKey, _Mapping]]] = ..., lease_ms: _Optional[int] = ..., unlock: _Optional[bool] = ..., broker_id: _Optional[int] = ...) -> None: ...

class ActingLockQueuesResponse(_message.Message):
    __slots__ = ("granted",)
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[ActingQueueKey]
    def __init__(self, granted: _Optional[_Iterable[_Union[ActingQueueKey, _Mapping]]] = ...) -> None: ...
