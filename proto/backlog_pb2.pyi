from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BacklogKey(_message.Message):
    __slots__ = ("topic", "group")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    group: str
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class BacklogRequest(_message.Message):
    __slots__ = ("broker_name", "keys", "limit")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    keys: _containers.RepeatedCompositeFieldContainer[BacklogKey]
    limit: int
    def __init__(self, broker_name: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[BacklogKey, _Mapping]]] = ..., limit: _Optional[int] = ...) -> None: ...

class BacklogResponse(_message.Message):
    __slots__ = ("receivable",)
    RECEIVABLE_FIELD_NUMBER: _ClassVar[int]
    receivable: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, receivable: _Optional[_Iterable[int]] = ...) -> None: ...
