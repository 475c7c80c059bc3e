from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SlaveHandshake(_message.Message):
    __slots__ = ("slave_id", "sync_from_last_file", "async_learner", "broker_name")
    SLAVE_ID_FIELD_NUMBER: _ClassVar[int]
    SYNC_FROM_LAST_FILE_FIELD_NUMBER: _ClassVar[int]
    ASYNC_LEARNER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    slave_id: int
    sync_from_last_file: bool
    async_learner: bool
    broker_name: str
    def __init__(self, slave_id: _Optional[int] = ..., sync_from_last_file: _Optional[bool] = ..., async_learner: _Optional[bool] = ..., broker_name: _Optional[str] = ...) -> None: ...

class SlaveAck(_message.Message):
    __slots__ = ("max_offset",)
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    max_offset: int
    def __init__(self, max_offset: _Optional[int] = ...) -> None: ...

class SlaveFrame(_message.Message):
    __slots__ = ("handshake", "ack")
    HANDSHAKE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    handshake: SlaveHandshake
    ack: SlaveAck
    def __init__(self, handshake: _Optional[_Union[SlaveHandshake, _Mapping]] = ..., ack: _Optional[_Union[SlaveAck, _Mapping]] = ...) -> None: ...

class EpochEntry(_message.Message):
    __slots__ = ("epoch", "start_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    start_offset: int
    def __init__(self, epoch: _Optional[int] = ..., start_offset: _Optional[int] = ...) -> None: ...

class MasterHandshake(_message.Message):
    __slots__ = ("epochs", "max_offset", "min_offset", "last_file_start")
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FILE_START_FIELD_NUMBER: _ClassVar[int]
    epochs: _containers.RepeatedCompositeFieldContainer[EpochEntry]
    max_offset: int
    min_offset: int
    last_file_start: int
    def __init__(self, epochs: _Optional[_Iterable[_Union[EpochEntry, _Mapping]]] = ..., max_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., last_file_start: _Optional[int] = ...) -> None: ...

class QueueEntries(_message.Message):
    __slots__ = ("topic", "queue_id", "first_queue_offset", "entries")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    first_queue_offset: int
    entries: bytes
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., first_queue_offset: _Optional[int] = ..., entries: _Optional[bytes] = ...) -> None: ...

class TransferBatch(_message.Message):
    __slots__ = ("start_offset", "epoch", "epoch_start_offset", "confirm_offset", "crc", "index", "metadata_version")
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CRC_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    start_offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    crc: int
    index: _containers.RepeatedCompositeFieldContainer[QueueEntries]
    metadata_version: int
    def __init__(self, start_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., epoch_start_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., crc: _Optional[int] = ..., index: _Optional[_Iterable[_Union[QueueEntries, _Mapping]]] = ..., metadata_version: _Optional[int] = ...) -> None: ...

class Refusal(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class MasterFrame(_message.Message):
    __slots__ = ("handshake", "batch", "refusal")
    HANDSHAKE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    handshake: MasterHandshake
    batch: TransferBatch
    refusal: Refusal
    def __init__(self, handshake: _Optional[_Union[MasterHandshake, _Mapping]] = ..., batch: _Optional[_Union[TransferBatch, _Mapping]] = ..., refusal: _Optional[_Union[Refusal, _Mapping]] = ...) -> None: ...

class RelayMetadata(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class RelayRequest(_message.Message):
    __slots__ = ("id", "broker_name", "method", "metadata", "timeout_ms", "cancel", "stream")
    ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    id: int
    broker_name: str
    method: str
    metadata: _containers.RepeatedCompositeFieldContainer[RelayMetadata]
    timeout_ms: int
    cancel: bool
    stream: bool
    def __init__(self, id: _Optional[int] = ..., broker_name: _Optional[str] = ..., method: _Optional[str] = ..., metadata: _Optional[_Iterable[_Union[RelayMetadata, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., cancel: _Optional[bool] = ..., stream: _Optional[bool] = ...) -> None: ...

class RelayResponse(_message.Message):
    __slots__ = ("id", "code", "details", "more")
    ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    id: int
    code: int
    details: str
    more: bool
    def __init__(self, id: _Optional[int] = ..., code: _Optional[int] = ..., details: _Optional[str] = ..., more: _Optional[bool] = ...) -> None: ...

class LocateRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class LocateResponse(_message.Message):
    __slots__ = ("ha_port", "client_endpoint")
    HA_PORT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ha_port: int
    client_endpoint: str
    def __init__(self, ha_port: _Optional[int] = ..., client_endpoint: _Optional[str] = ...) -> None: ...
