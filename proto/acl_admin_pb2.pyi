from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AclUser(_message.Message):
    __slots__ = ("username", "password", "user_type", "user_status")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    USER_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_STATUS_FIELD_NUMBER: _ClassVar[int]
    username: str
    password: str
    user_type: str
    user_status: str
    def __init__(self, username: _Optional[str] = ..., password: _Optional[str] = ..., user_type: _Optional[str] = ..., user_status: _Optional[str] = ...) -> None: ...

class AclPolicyEntry(_message.Message):
    __slots__ = ("resource", "actions", "decision", "source_ips")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IPS_FIELD_NUMBER: _ClassVar[int]
    resource: str
    actions: _containers.RepeatedScalarFieldContainer[str]
    decision: str
    source_ips: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, resource: _Optional[str] = ..., actions: _Optional[_Iterable[str]] = ..., decision: _Optional[str] = ..., source_ips: _Optional[_Iterable[str]] = ...) -> None: ...

class AclPolicy(_message.Message):
    __slots__ = ("policy_type", "entries")
    POLICY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    policy_type: str
    entries: _containers.RepeatedCompositeFieldContainer[AclPolicyEntry]
    def __init__(self, policy_type: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AclPolicyEntry, _Mapping]]] = ...) -> None: ...

class AclRecord(_message.Message):
    __slots__ = ("subject", "policies")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    subject: str
    policies: _containers.RepeatedCompositeFieldContainer[AclPolicy]
    def __init__(self, subject: _Optional[str] = ..., policies: _Optional[_Iterable[_Union[AclPolicy, _Mapping]]] = ...) -> None: ...

class AclCreateUserRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: AclUser
    def __init__(self, user: _Optional[_Union[AclUser, _Mapping]] = ...) -> None: ...

class AclUpdateUserRequest(_message.Message):
    __slots__ = ("username", "password", "user_type", "user_status")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    USER_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_STATUS_FIELD_NUMBER: _ClassVar[int]
    username: str
    password: str
    user_type: str
    user_status: str
    def __init__(self, username: _Optional[str] = ..., password: _Optional[str] = ..., user_type: _Optional[str] = ..., user_status: _Optional[str] = ...) -> None: ...

class AclUsernameRequest(_message.Message):
    __slots__ = ("username",)
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    username: str
    def __init__(self, username: _Optional[str] = ...) -> None: ...

class AclListUserRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: str
    def __init__(self, filter: _Optional[str] = ...) -> None: ...

class AclPutRequest(_message.Message):
    __slots__ = ("acl",)
    ACL_FIELD_NUMBER: _ClassVar[int]
    acl: AclRecord
    def __init__(self, acl: _Optional[_Union[AclRecord, _Mapping]] = ...) -> None: ...

class AclDeleteRequest(_message.Message):
    __slots__ = ("subject", "resource", "policy_type")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    POLICY_TYPE_FIELD_NUMBER: _ClassVar[int]
    subject: str
    resource: str
    policy_type: str
    def __init__(self, subject: _Optional[str] = ..., resource: _Optional[str] = ..., policy_type: _Optional[str] = ...) -> None: ...

class AclSubjectRequest(_message.Message):
    __slots__ = ("subject",)
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    subject: str
    def __init__(self, subject: _Optional[str] = ...) -> None: ...

class AclListRequest(_message.Message):
    __slots__ = ("subject_filter", "resource_filter")
    SUBJECT_FILTER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FILTER_FIELD_NUMBER: _ClassVar[int]
    subject_filter: str
    resource_filter: str
    def __init__(self, subject_filter: _Optional[str] = ..., resource_filter: _Optional[str] = ...) -> None: ...

class AclDone(_message.Message):
    __slots__ = ("version", "detail", "replicated", "source")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    version: int
    detail: str
    replicated: bool
    source: str
    def __init__(self, version: _Optional[int] = ..., detail: _Optional[str] = ..., replicated: _Optional[bool] = ..., source: _Optional[str] = ...) -> None: ...

class AclEnforcer(_message.Message):
    __slots__ = ("container", "brokers", "version", "origin", "reported_ms_ago")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    REPORTED_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    container: str
    brokers: _containers.RepeatedScalarFieldContainer[str]
    version: int
    origin: str
    reported_ms_ago: int
    def __init__(self, container: _Optional[str] = ..., brokers: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., origin: _Optional[str] = ..., reported_ms_ago: _Optional[int] = ...) -> None: ...

class AclUsersResponse(_message.Message):
    __slots__ = ("version", "users")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    version: int
    users: _containers.RepeatedCompositeFieldContainer[AclUser]
    def __init__(self, version: _Optional[int] = ..., users: _Optional[_Iterable[_Union[AclUser, _Mapping]]] = ...) -> None: ...

class AclAclsResponse(_message.Message):
    __slots__ = ("version", "acls", "source", "entries", "origin", "enforcers")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    ENFORCERS_FIELD_NUMBER: _ClassVar[int]
    version: int
    acls: _containers.RepeatedCompositeFieldContainer[AclRecord]
    source: str
    entries: int
    origin: str
    enforcers: _containers.RepeatedCompositeFieldContainer[AclEnforcer]
    def __init__(self, version: _Optional[int] = ..., acls: _Optional[_Iterable[_Union[AclRecord, _Mapping]]] = ..., source: _Optional[str] = ..., entries: _Optional[int] = ..., origin: _Optional[str] = ..., enforcers: _Optional[_Iterable[_Union[AclEnforcer, _Mapping]]] = ...) -> None: ...
