"""A broker's id under the controller: the ``brokerIdentity`` files and how registration resumes.

Rules (reference 4.6 ``register()``, 7 ``brokerIdentity``; scenarios 40-44, upstream #7704):

* ``brokerIdentity`` holds ``cluster#brokerName#brokerId``; ``brokerIdentity-temp`` holds
  ``cluster#brokerName#brokerId#ip:port;timestampMs`` (the register check code).  The
  configured ``brokerId`` is ignored in controller mode: the controller assigns ids.
* States: INITIAL -> TEMP_FILE -> IDENTITY_FILE -> REGISTERED.  Registration resumes from
  the files: an identity file goes straight to RegisterBroker (a new address keeps the id,
  scenario 40); a temp file applies its id again with the same check code, which the
  controller accepts as an idempotent retry (a crash between the temp file and the apply,
  or between the apply and the identity file, scenarios 41-42); no file asks
  GetNextBrokerId, writes the temp file, then applies.
* An id the controller refuses (CONTROLLER_BROKER_ID_INVALID: taken meanwhile, scenario 43)
  deletes the temp file and starts again from INITIAL with the next id.
* A file naming another cluster or group, or one that does not parse, is refused: the
  broker stays fenced and invisible and says which file to look at (scenario 44; #7704).
* The identity file is written only after the controller applied the id, and the temp file
  is deleted only after the identity file is durable (the driver's order).
* Pure: file contents and controller replies in, the next step out.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union

IDENTITY_FILE = "brokerIdentity"
TEMP_FILE = "brokerIdentity-temp"


class RegisterState(str, Enum):
    INITIAL = "INITIAL"
    TEMP_FILE = "TEMP_FILE"
    IDENTITY_FILE = "IDENTITY_FILE"
    REGISTERED = "REGISTERED"
    REFUSED = "REFUSED"


@dataclass(frozen=True)
class Identity:
    cluster: str
    broker_name: str
    broker_id: int

    def render(self) -> str:
        return f"{self.cluster}#{self.broker_name}#{self.broker_id}"


@dataclass(frozen=True)
class TempIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    check_code: str       # "ip:port;timestampMs"

    def render(self) -> str:
        return f"{self.cluster}#{self.broker_name}#{self.broker_id}#{self.check_code}"


def parse_identity(text: str) -> Identity | None:
    parts = text.strip().split("#")
    if len(parts) != 3 or not parts[0] or not parts[1] or not _is_id(parts[2]):
        return None
    return Identity(parts[0], parts[1], int(parts[2]))


def parse_temp(text: str) -> TempIdentity | None:
    parts = text.strip().split("#")
    if len(parts) != 4 or not parts[0] or not parts[1] or not _is_id(parts[2]) or ";" not in parts[3]:
        return None
    return TempIdentity(parts[0], parts[1], int(parts[2]), parts[3])


def _is_id(text: str) -> bool:
    return text.isdigit() and 0 < int(text) < 2**31


# ---- steps ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AskNextId:
    pass


@dataclass(frozen=True)
class WriteTemp:
    temp: TempIdentity


@dataclass(frozen=True)
class ApplyId:
    temp: TempIdentity


@dataclass(frozen=True)
class WriteIdentity:
    identity: Identity          # then delete the temp file


@dataclass(frozen=True)
class DeleteTempAndRestart:
    pass


@dataclass(frozen=True)
class Register:
    broker_id: int


@dataclass(frozen=True)
class Refuse:
    reason: str


Step = Union[AskNextId, WriteTemp, ApplyId, WriteIdentity, DeleteTempAndRestart, Register, Refuse]

# What the driver read from a file: its text, or None when the file does not exist.
FileText = Union[str, None]


class IdentityRegistration:
    def __init__(self, cluster: str, broker_name: str, address: str):
        self.cluster, self.broker_name, self.address = cluster, broker_name, address
        self.state = RegisterState.INITIAL
        self.broker_id: int | None = None

    def start(self, identity_text: FileText, temp_text: FileText) -> Step:
        """The first step from the files as found at start."""
        if identity_text is not None:
            identity = parse_identity(identity_text)
            if identity is None:
                return self._refuse(f"{IDENTITY_FILE} does not parse ({identity_text.strip()[:100]!r}); "
                                    "expected cluster#brokerName#brokerId")
            if (identity.cluster, identity.broker_name) != (self.cluster, self.broker_name):
                return self._refuse(f"{IDENTITY_FILE} names {identity.cluster}/{identity.broker_name}, this broker is "
                                    f"{self.cluster}/{self.broker_name}: the store belongs to another group")
            return self._registering(identity.broker_id)
        if temp_text is not None:
            temp = parse_temp(temp_text)
            if temp is None or (temp.cluster, temp.broker_name) != (self.cluster, self.broker_name):
                return DeleteTempAndRestart()  # a half-written temp file promises nothing: start over
            self.state, self.broker_id = RegisterState.TEMP_FILE, temp.broker_id
            return ApplyId(temp)
        return AskNextId()

    def next_id(self, broker_id: int, now_ms: int) -> Step:
        """GetNextBrokerId answered: write the temp file with it."""
        return WriteTemp(TempIdentity(self.cluster, self.broker_name, broker_id, f"{self.address};{now_ms}"))

    def temp_written(self, temp: TempIdentity) -> Step:
        self.state, self.broker_id = RegisterState.TEMP_FILE, temp.broker_id
        return ApplyId(temp)

    def applied(self, accepted: bool) -> Step:
        """ApplyBrokerId answered (accepted, or refused as CONTROLLER_BROKER_ID_INVALID)."""
        assert self.state is RegisterState.TEMP_FILE and self.broker_id is not None, self.state
        if not accepted:
            self.state, self.broker_id = RegisterState.INITIAL, None
            return DeleteTempAndRestart()
        return WriteIdentity(Identity(self.cluster, self.broker_name, self.broker_id))

    def restarted(self) -> Step:
        self.state, self.broker_id = RegisterState.INITIAL, None
        return AskNextId()

    def identity_written(self) -> Step:
        assert self.broker_id is not None
        return self._registering(self.broker_id)

    def registered(self) -> None:
        self.state = RegisterState.REGISTERED

    def _registering(self, broker_id: int) -> Step:
        self.state, self.broker_id = RegisterState.IDENTITY_FILE, broker_id
        return Register(broker_id)

    def _refuse(self, reason: str) -> Step:
        self.state = RegisterState.REFUSED
        return Refuse(reason)
