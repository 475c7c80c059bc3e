"""Resource name rules, shared by every edge that accepts a topic or group name.

RocketMQ's rule: ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters for topics (``TOPIC_MAX_LENGTH``)
and 255 for groups.  System topics (``rmq_sys_`` prefix, ``%RETRY%``/``%DLQ%``) are valid
names but not valid for users to create; :func:`is_system_topic` says which.
"""
from __future__ import annotations

import hashlib
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
    """The legacy (v1) retry topic shared by every topic of a group; no longer written."""
    return RETRY_PREFIX + group


def retry_topic_for(group: str, topic: str) -> str:
    """The retry topic of one (group, topic), as RocketMQ 5's v2 ``%RETRY%group+topic`` keeps
    redelivery apart per topic.  '+' is not a valid name character (receipt handles, offset
    files and routes validate names), so: ``%RETRY%<group>%<topic>`` when neither name holds a
    '%' and it fits TOPIC_MAX_LENGTH, else ``%RETRY%%<64-bit blake2b of the pair>``.  The two
    forms cannot meet (a readable one never starts ``%RETRY%%``) and both are valid names."""
    name = f"{RETRY_PREFIX}{group}%{topic}"
    if "%" in group or "%" in topic or len(name) > TOPIC_MAX_LENGTH:
        name = RETRY_PREFIX + "%" + hashlib.blake2b(f"{group}\n{topic}".encode(), digest_size=8).hexdigest()
    return name


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group
