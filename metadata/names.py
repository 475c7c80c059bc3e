"""Resource name rules, shared by every edge that accepts a topic or group name.

RocketMQ's rule: ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters for topics (``TOPIC_MAX_LENGTH``)
and 255 for groups.  System topics (``rmq_sys_`` prefix, ``%RETRY%``/``%DLQ%``) are valid
names but not valid for users to create; :func:`is_system_topic` says which.
"""
from __future__ import annotations

import re

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


def is_valid_topic_name(name: str) -> bool:
    return isinstance(name, str) and 0 < len(name) <= TOPIC_MAX_LENGTH and _NAME.fullmatch(name) is not None


def is_valid_group_name(name: str) -> bool:
    return isinstance(name, str) and 0 < len(name) <= GROUP_MAX_LENGTH and _NAME.fullmatch(name) is not None


def is_system_topic(name: str) -> bool:
    return name.startswith((SYSTEM_TOPIC_PREFIX, RETRY_PREFIX, DLQ_PREFIX)) or name in {"TBW102", "SCHEDULE_TOPIC_XXXX"}


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group
