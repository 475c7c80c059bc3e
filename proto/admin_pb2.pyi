from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdminDataVersion(_message.Message):
    __slots__ = ("state_version", "timestamp_ms", "counter")
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    state_version: int
    timestamp_ms: int
    counter: int
    def __init__(self, state_version: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., counter: _Optional[int] = ...) -> None: ...

class AdminTopic(_message.Message):
    __slots__ = ("topic", "read_queue_nums", "write_queue_nums", "perm", "message_type")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    def __init__(self, topic: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[str] = ...) -> None: ...

class AdminGroup(_message.Message):
    __slots__ = ("group", "consume_message_orderly", "retry_max_times", "consume_enable")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUME_MESSAGE_ORDERLY_FIELD_NUMBER: _ClassVar[int]
    RETRY_MAX_TIMES_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ENABLE_FIELD_NUMBER: _ClassVar[int]
    group: str
    consume_message_orderly: bool
    retry_max_times: int
    consume_enable: bool
    def __init__(self, group: _Optional[str] = ..., consume_message_orderly: _Optional[bool] = ..., retry_max_times: _Optional[int] = ..., consume_enable: _Optional[bool] = ...) -> None: ...

class AdminCreateOrUpdateTopicRequest(_message.Message):
    __slots__ = ("broker_name", "topic")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: AdminTopic
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[_Union[AdminTopic, _Mapping]] = ...) -> None: ...

class AdminDeleteTopicRequest(_message.Message):
    __slots__ = ("broker_name", "topic")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class AdminCreateOrUpdateGroupRequest(_message.Message):
    __slots__ = ("broker_name", "group")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    group: AdminGroup
    def __init__(self, broker_name: _Optional[str] = ..., group: _Optional[_Union[AdminGroup, _Mapping]] = ...) -> None: ...

class AdminDeleteGroupRequest(_message.Message):
    __slots__ = ("broker_name", "group")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    group: str
    def __init__(self, broker_name: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class AdminDone(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class AdminListTopicsRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class AdminBrokerTopics(_message.Message):
    __slots__ = ("broker_name", "topics", "data_version")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topics: _containers.RepeatedCompositeFieldContainer[AdminTopic]
    data_version: AdminDataVersion
    def __init__(self, broker_name: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[AdminTopic, _Mapping]]] = ..., data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ...) -> None: ...

class AdminListTopicsResponse(_message.Message):
    __slots__ = ("brokers",)
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[AdminBrokerTopics]
    def __init__(self, brokers: _Optional[_Iterable[_Union[AdminBrokerTopics, _Mapping]]] = ...) -> None: ...

class AdminListGroupsRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class AdminBrokerGroups(_message.Message):
    __slots__ = ("broker_name", "groups", "data_version")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    groups: _containers.RepeatedCompositeFieldContainer[AdminGroup]
    data_version: AdminDataVersion
    def __init__(self, broker_name: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[AdminGroup, _Mapping]]] = ..., data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ...) -> None: ...

class AdminListGroupsResponse(_message.Message):
    __slots__ = ("brokers",)
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[AdminBrokerGroups]
    def __init__(self, brokers: _Optional[_Iterable[_Union[AdminBrokerGroups, _Mapping]]] = ...) -> None: ...

class AdminTopicStatusRequest(_message.Message):
    __slots__ = ("broker_name", "topic")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class AdminQueueStatus(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset", "last_update_ms")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_ms: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_update_ms: _Optional[int] = ...) -> None: ...

class AdminBrokerTopicStatus(_message.Message):
    __slots__ = ("broker_name", "broker_id", "role", "queues", "acting")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    ACTING_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    role: str
    queues: _containers.RepeatedCompositeFieldContainer[AdminQueueStatus]
    acting: bool
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[AdminQueueStatus, _Mapping]]] = ..., acting: _Optional[bool] = ...) -> None: ...

class AdminTopicStatusResponse(_message.Message):
    __slots__ = ("topic", "brokers")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    brokers: _containers.RepeatedCompositeFieldContainer[AdminBrokerTopicStatus]
    def __init__(self, topic: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[AdminBrokerTopicStatus, _Mapping]]] = ...) -> None: ...

class AdminConsumerProgressRequest(_message.Message):
    __slots__ = ("broker_name", "group", "topic")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    group: str
    topic: str
    def __init__(self, broker_name: _Optional[str] = ..., group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class AdminQueueProgress(_message.Message):
    __slots__ = ("topic", "queue_id", "broker_offset", "consumer_offset", "inflight", "lag")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    inflight: int
    lag: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., inflight: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class AdminBrokerProgress(_message.Message):
    __slots__ = ("broker_name", "broker_id", "queues", "group_known", "acting")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    GROUP_KNOWN_FIELD_NUMBER: _ClassVar[int]
    ACTING_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    queues: _containers.RepeatedCompositeFieldContainer[AdminQueueProgress]
    group_known: bool
    acting: bool
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[AdminQueueProgress, _Mapping]]] = ..., group_known: _Optional[bool] = ..., acting: _Optional[bool] = ...) -> None: ...

class AdminConsumerProgressResponse(_message.Message):
    __slots__ = ("group", "brokers")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    group: str
    brokers: _containers.RepeatedCompositeFieldContainer[AdminBrokerProgress]
    def __init__(self, group: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[AdminBrokerProgress, _Mapping]]] = ...) -> None: ...

class AdminBrokerStatusRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class AdminBrokerStatus(_message.Message):
    __slots__ = ("broker_name", "broker_id", "cluster", "role", "status_json")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_JSON_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    cluster: str
    role: str
    status_json: str
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., cluster: _Optional[str] = ..., role: _Optional[str] = ..., status_json: _Optional[str] = ...) -> None: ...

class AdminBrokerStatusResponse(_message.Message):
    __slots__ = ("brokers", "container_json")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_JSON_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[AdminBrokerStatus]
    container_json: str
    def __init__(self, brokers: _Optional[_Iterable[_Union[AdminBrokerStatus, _Mapping]]] = ..., container_json: _Optional[str] = ...) -> None: ...

class AdminGetConsumerOffsetsRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class AdminGetConsumerOffsetsResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "role", "document", "data_version")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    role: str
    document: str
    data_version: AdminDataVersion
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., document: _Optional[str] = ..., data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ...) -> None: ...

class AdminGetReplicaMetadataRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "held")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    held: AdminReplicaVersions
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., held: _Optional[_Union[AdminReplicaVersions, _Mapping]] = ...) -> None: ...

class AdminReplicaVersions(_message.Message):
    __slots__ = ("topics", "subscription_groups", "consumer_offsets", "timer_checkpoint")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TIMER_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    topics: AdminDataVersion
    subscription_groups: AdminDataVersion
    consumer_offsets: AdminDataVersion
    timer_checkpoint: AdminDataVersion
    def __init__(self, topics: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., subscription_groups: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., consumer_offsets: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., timer_checkpoint: _Optional[_Union[AdminDataVersion, _Mapping]] = ...) -> None: ...

class AdminReplicaDocument(_message.Message):
    __slots__ = ("document", "data_version", "unchanged")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    document: str
    data_version: AdminDataVersion
    unchanged: bool
    def __init__(self, document: _Optional[str] = ..., data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., unchanged: _Optional[bool] = ...) -> None: ...

class AdminGetReplicaMetadataResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "role", "topics", "subscription_groups", "consumer_offsets", "timer_checkpoint")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TIMER_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    role: str
    topics: AdminReplicaDocument
    subscription_groups: AdminReplicaDocument
    consumer_offsets: AdminReplicaDocument
    timer_checkpoint: AdminReplicaDocument
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., topics: _Optional[_Union[AdminReplicaDocument, _Mapping]] = ..., subscription_groups: _Optional[_Union[AdminReplicaDocument, _Mapping]] = ..., consumer_offsets: _Optional[_Union[AdminReplicaDocument, _Mapping]] = ..., timer_checkpoint: _Optional[_Union[AdminReplicaDocument, _Mapping]] = ...) -> None: ...

class AdminQueueOffset(_message.Message):
    __slots__ = ("topic", "group", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    group: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class AdminWriteConsumerOffsetsRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "expected_data_version", "offsets")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    expected_data_version: AdminDataVersion
    offsets: _containers.RepeatedCompositeFieldContainer[AdminQueueOffset]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., expected_data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., offsets: _Optional[_Iterable[_Union[AdminQueueOffset, _Mapping]]] = ...) -> None: ...

class AdminWriteConsumerOffsetsResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "written", "data_version", "offsets", "detail")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    written: bool
    data_version: AdminDataVersion
    offsets: _containers.RepeatedCompositeFieldContainer[AdminQueueOffset]
    detail: str
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., written: _Optional[bool] = ..., data_version: _Optional[_Union[AdminDataVersion, _Mapping]] = ..., offsets: _Optional[_Iterable[_Union[AdminQueueOffset, _Mapping]]] = ..., detail: _Optional[str] = ...) -> None: ...

class AdminAddBrokerRequest(_message.Message):
    __slots__ = ("config_path",)
    CONFIG_PATH_FIELD_NUMBER: _ClassVar[int]
    config_path: str
    def __init__(self, config_path: _Optional[str] = ...) -> None: ...

class AdminAddBrokerResponse(_message.Message):
    __slots__ = ("canonical_name",)
    CANONICAL_NAME_FIELD_NUMBER: _ClassVar[int]
    canonical_name: str
    def __init__(self, canonical_name: _Optional[str] = ...) -> None: ...

class AdminRemoveBrokerRequest(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_id: int
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class AdminRemoveBrokerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminResetOffsetRequest(_message.Message):
    __slots__ = ("broker_name", "group", "topic", "timestamp_ms", "to_max_offset")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    group: str
    topic: str
    timestamp_ms: int
    to_max_offset: bool
    def __init__(self, broker_name: _Optional[str] = ..., group: _Optional[str] = ..., topic: _Optional[str] = ..., timestamp_ms: _Optional[int] = ..., to_max_offset: _Optional[bool] = ...) -> None: ...

class AdminQueueReset(_message.Message):
    __slots__ = ("queue_id", "old_offset", "new_offset")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEW_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    old_offset: int
    new_offset: int
    def __init__(self, queue_id: _Optional[int] = ..., old_offset: _Optional[int] = ..., new_offset: _Optional[int] = ...) -> None: ...

class AdminResetOffsetResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "queues")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    queues: _containers.RepeatedCompositeFieldContainer[AdminQueueReset]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[AdminQueueReset, _Mapping]]] = ...) -> None: ...

class AdminQueryMessageRequest(_message.Message):
    __slots__ = ("broker_name", "topic", "message_id", "key", "max_scan", "max_results", "max_body_bytes")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_SCAN_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    MAX_BODY_BYTES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    topic: str
    message_id: str
    key: str
    max_scan: int
    max_results: int
    max_body_bytes: int
    def __init__(self, broker_name: _Optional[str] = ..., topic: _Optional[str] = ..., message_id: _Optional[str] = ..., key: _Optional[str] = ..., max_scan: _Optional[int] = ..., max_results: _Optional[int] = ..., max_body_bytes: _Optional[int] = ...) -> None: ...

class AdminMessage(_message.Message):
    __slots__ = ("broker_name", "broker_id", "topic", "queue_id", "queue_offset", "commit_offset", "message_id", "tag", "keys", "born_timestamp_ms", "store_timestamp_ms", "born_host", "body_size", "body", "properties", "user_properties")
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
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    BODY_SIZE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    USER_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_offset: int
    message_id: str
    tag: str
    keys: str
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str
    body_size: int
    body: bytes
    properties: _containers.ScalarMap[str, str]
    user_properties: _containers.ScalarMap[str, str]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commit_offset: _Optional[int] = ..., message_id: _Optional[str] = ..., tag: _Optional[str] = ..., keys: _Optional[str] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ..., born_host: _Optional[str] = ..., body_size: _Optional[int] = ..., body: _Optional[bytes] = ..., properties: _Optional[_Mapping[str, str]] = ..., user_properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AdminQueryMessageResponse(_message.Message):
    __slots__ = ("messages", "scanned", "truncated")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[AdminMessage]
    scanned: int
    truncated: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[AdminMessage, _Mapping]]] = ..., scanned: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class AdminClientConnectionsRequest(_message.Message):
    __slots__ = ("group", "topic", "client_type")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    client_type: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., client_type: _Optional[str] = ...) -> None: ...

class AdminClientConnection(_message.Message):
    __slots__ = ("client_id", "client_type", "group", "topics", "idle_ms", "telemetry_streams")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    IDLE_MS_FIELD_NUMBER: _ClassVar[int]
    TELEMETRY_STREAMS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_type: str
    group: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    idle_ms: int
    telemetry_streams: int
    def __init__(self, client_id: _Optional[str] = ..., client_type: _Optional[str] = ..., group: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., idle_ms: _Optional[int] = ..., telemetry_streams: _Optional[int] = ...) -> None: ...

class AdminClientConnectionsResponse(_message.Message):
    __slots__ = ("clients",)
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[AdminClientConnection]
    def __init__(self, clients: _Optional[_Iterable[_Union[AdminClientConnection, _Mapping]]] = ...) -> None: ...

class AdminBrokerConfigEntry(_message.Message):
    __slots__ = ("key", "value", "unit", "live")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    unit: str
    live: bool
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., unit: _Optional[str] = ..., live: _Optional[bool] = ...) -> None: ...

class AdminGetBrokerConfigRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class AdminGetBrokerConfigResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "source", "entries")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    source: str
    entries: _containers.RepeatedCompositeFieldContainer[AdminBrokerConfigEntry]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., source: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AdminBrokerConfigEntry, _Mapping]]] = ...) -> None: ...

class AdminUpdateBrokerConfigRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    values: _containers.ScalarMap[str, str]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AdminUpdateBrokerConfigResponse(_message.Message):
    __slots__ = ("broker_name", "broker_id", "entries")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    entries: _containers.RepeatedCompositeFieldContainer[AdminBrokerConfigEntry]
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[AdminBrokerConfigEntry, _Mapping]]] = ...) -> None: ...
