"""RocketMQ's controller response codes as a named enum, and the reply value.

Every rejection the state machine can produce is one of these codes (reference section 8:
2000-2014) plus a human-readable remark; the gRPC layer copies both into the reply
unchanged, so brokers and scripts see RocketMQ's numbers.
"""
from __future__ import annotations

from enum import IntEnum


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
