from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ReleaseRequest(_message.Message):
    __slots__ = ("broker_name", "epoch", "target_endpoint")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    epoch: int
    target_endpoint: str
    def __init__(self, broker_name: _Optional[str] = ..., epoch: _Optional[int] = ..., target_endpoint: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("sealed_end", "broker_entry_json")
    SEALED_END_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENTRY_JSON_FIELD_NUMBER: _ClassVar[int]
    sealed_end: int
    broker_entry_json: str
    def __init__(self, sealed_end: _Optional[int] = ..., broker_entry_json: _Optional[str] = ...) -> None: ...

class OpenRequest(_message.Message):
    __slots__ = ("broker_name", "epoch", "broker_entry_json", "handed_end")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENTRY_JSON_FIELD_NUMBER: _ClassVar[int]
    HANDED_END_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    epoch: int
    broker_entry_json: str
    handed_end: int
    def __init__(self, broker_name: _Optional[str] = ..., epoch: _Optional[int] = ..., broker_entry_json: _Optional[str] = ..., handed_end: _Optional[int] = ...) -> None: ...

class OpenResponse(_message.Message):
    __slots__ = ("sealed_end", "starts_at")
    SEALED_END_FIELD_NUMBER: _ClassVar[int]
    STARTS_AT_FIELD_NUMBER: _ClassVar[int]
    sealed_end: int
    starts_at: int
    def __init__(self, sealed_end: _Optional[int] = ..., starts_at: _Optional[int] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("broker_name", "epoch", "broker_entry_json")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENTRY_JSON_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    epoch: int
    broker_entry_json: str
    def __init__(self, broker_name: _Optional[str] = ..., epoch: _Optional[int] = ..., broker_entry_json: _Optional[str] = ...) -> None: ...

class CheckStoreRequest(_message.Message):
    __slots__ = ("broker_name", "broker_entry_json", "owner")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENTRY_JSON_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_entry_json: str
    owner: str
    def __init__(self, broker_name: _Optional[str] = ..., broker_entry_json: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class CheckStoreResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
