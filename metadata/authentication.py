"""Client authentication as the RocketMQ 5 clients sign their calls (``MQv2-HMAC-SHA1``).

Every call carries two metadata values::

    x-mq-date-time: 20261121T132908Z
    authorization:  MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>

where ``<hex>`` is HMAC-SHA1(key=secret key, message=the x-mq-date-time text).

Rules:
- Pure: no clock reads, no I/O.  The caller passes ``now_ms`` (UTC) and the server's UTC
  offset; the official clients write their *local* time with a ``Z`` suffix, so a date-time
  is accepted when it is within the skew of either the server's UTC or its local time.
- Network input: :func:`parse_authorization` raises only :class:`AuthorizationError`
  (a hypothesis test holds it to that); :func:`verify` never raises for any header text and
  answers a named :class:`Rejection` or ``None``.
- Signatures are compared in constant time, hex case-insensitively.  An unknown access key
  costs the same HMAC as a known one.
- ``Credential`` may be ``<ak>/<scope...>`` as RocketMQ's proxy accepts; the access key is
  the part before the first ``/``.  Items other than Credential, SignedHeaders and
  Signature are ignored, as the proxy does.
"""
from __future__ import annotations

import calendar
import hashlib
import hmac
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Protocol

from metadata.config import ConfigError

ALGORITHM = "MQv2-HMAC-SHA1"
SIGNED_HEADER = "x-mq-date-time"
MAX_HEADER_CHARS = 1024
MAX_ACCOUNTS = 10_000
MAX_KEY_CHARS = 256
_SIGNATURE = re.compile(r"[0-9a-fA-F]{40}")
_DATE_TIME = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")
_ACCESS_KEY = re.compile(r"[!-~]+")  # printable ASCII, no space
_DUMMY_SECRET = b"relaymq: no such access key"


class AuthorizationError(ValueError):
    """The ``authorization`` header is not an ``MQv2-HMAC-SHA1`` header we can read."""


class Rejection(Enum):
    """Why a call is not authenticated; the value is the message the client sees."""

    NO_AUTHORIZATION = "the authorization metadata is missing"
    MALFORMED_AUTHORIZATION = "the authorization metadata is malformed"
    NO_DATE_TIME = "the x-mq-date-time metadata is missing"
    MALFORMED_DATE_TIME = "x-mq-date-time is not yyyyMMddTHHmmssZ"
    DATE_TIME_SKEWED = "x-mq-date-time is too far from the server's time"
    NO_ACCESS_KEY = "no access key: the client has no credentials"
    UNKNOWN_ACCESS_KEY = "the access key is unknown"
    BAD_SIGNATURE = "the signature does not match"


@dataclass(frozen=True)
class AuthorizationHeader:
    access_key: str
    signature: str  # 40 hex digits, lowercase


@dataclass(frozen=True)
class Accounts:
    """Access key -> secret key, as given in the accounts file."""

    secret_keys: Mapping[str, str]

    def secret_key(self, access_key: str) -> str | None:
        return self.secret_keys.get(access_key)

    def disabled(self, access_key: str) -> bool:
        """An accounts file has no disabled accounts (an ACL file's users may be disabled)."""
        return False


class AccountSource(Protocol):
    """Where signatures are checked: :class:`Accounts`, or the users of an ACL store."""

    def secret_key(self, access_key: str) -> str | None: ...

    def disabled(self, access_key: str) -> bool: ...


def sign(secret_key: str, date_time: str) -> str:
    """What a client puts in ``Signature=``: lowercase hex HMAC-SHA1 of the date-time."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def authorization_value(access_key: str, secret_key: str, date_time: str) -> str:
    """The header as the official clients write it."""
    return f"{ALGORITHM} Credential={access_key}, SignedHeaders={SIGNED_HEADER}, Signature={sign(secret_key, date_time)}"


def _items(text: str) -> dict[str, str]:
    items: dict[str, str] = {}
    for part in text.split(","):
        key, equals, value = part.strip().partition("=")
        if not equals or not key:
            raise AuthorizationError(f"{part.strip()[:40]!r} is not key=value")
        if key in items:
            raise AuthorizationError(f"{key[:40]!r} is given twice")
        items[key] = value.strip()
    return items


def parse_authorization(text: str) -> AuthorizationHeader:
    if not isinstance(text, str) or len(text) > MAX_HEADER_CHARS:
        raise AuthorizationError("missing or too long")
    algorithm, _, rest = text.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise AuthorizationError(f"algorithm {algorithm[:40]!r} is not {ALGORITHM}")
    items = _items(rest)
    for required in ("Credential", "SignedHeaders", "Signature"):
        if required not in items:
            raise AuthorizationError(f"{required} is missing")
    if items["SignedHeaders"].lower() != SIGNED_HEADER:
        raise AuthorizationError(f"SignedHeaders must be {SIGNED_HEADER}")
    access_key = items["Credential"].split("/", 1)[0]
    if access_key and not _ACCESS_KEY.fullmatch(access_key):
        raise AuthorizationError("the access key is not printable ASCII")
    signature = items["Signature"]
    if not _SIGNATURE.fullmatch(signature):
        raise AuthorizationError("Signature is not 40 hex digits")
    return AuthorizationHeader(access_key, signature.lower())


def parse_date_time(text: str) -> int | None:
    """``yyyyMMddTHHmmssZ`` read as UTC, in epoch milliseconds; None when malformed."""
    match = _DATE_TIME.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1] and hour < 24 and minute < 60
            and second < 60 and year >= 1970):
        return None
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) * 1000


def _skewed(stamp_ms: int, now_ms: int, local_offset_ms: int, max_skew_ms: int) -> bool:
    if max_skew_ms == 0:
        return False
    return min(abs(stamp_ms - now_ms), abs(stamp_ms - (now_ms + local_offset_ms))) > max_skew_ms


def verify(accounts: AccountSource, authorization: str, date_time: str, now_ms: int, local_offset_ms: int,
           max_skew_ms: int) -> Rejection | None:
    """None when the call is signed by a known account at about the right time.

    ``max_skew_ms`` 0 means the date-time is not checked against the clock.
    """
    return verify_caller(accounts, authorization, date_time, now_ms, local_offset_ms, max_skew_ms)[1]


def verify_caller(accounts: AccountSource, authorization: str, date_time: str, now_ms: int, local_offset_ms: int,
                  max_skew_ms: int) -> tuple[str, Rejection | None]:
    """(the access key the call is signed with, None) when :func:`verify` accepts it, else
    ("", the rejection).  The access key is the authenticated subject; nothing else in the
    call's metadata names who the caller is."""
    rejection = _check(accounts, authorization, date_time, now_ms, local_offset_ms, max_skew_ms)
    if isinstance(rejection, Rejection):
        return "", rejection
    return rejection, None


def _check(accounts: AccountSource, authorization: str, date_time: str, now_ms: int, local_offset_ms: int,
           max_skew_ms: int) -> Rejection | str:
    if not authorization:
        return Rejection.NO_AUTHORIZATION
    try:
        header = parse_authorization(authorization)
    except AuthorizationError:
        return Rejection.MALFORMED_AUTHORIZATION
    if not date_time:
        return Rejection.NO_DATE_TIME
    stamp_ms = parse_date_time(date_time)
    if stamp_ms is None:
        return Rejection.MALFORMED_DATE_TIME
    if not header.access_key:
        return Rejection.NO_ACCESS_KEY
    secret = accounts.secret_key(header.access_key)
    key = secret.encode("utf-8") if secret is not None else _DUMMY_SECRET
    expected = hmac.new(key, date_time.encode("ascii"), hashlib.sha1).hexdigest()
    matches = hmac.compare_digest(expected, header.signature)
    if secret is None:
        return Rejection.UNKNOWN_ACCESS_KEY
    if not matches:
        return Rejection.BAD_SIGNATURE
    if _skewed(stamp_ms, now_ms, local_offset_ms, max_skew_ms):
        return Rejection.DATE_TIME_SKEWED
    return header.access_key


# ---------------------------------------------------------------- the accounts file

def _account(entry: Any, where: str) -> tuple[str, str]:
    if not isinstance(entry, Mapping):
        raise ConfigError(where, None, "must be a table with accessKey and secretKey")
    unknown = sorted(set(entry) - {"accessKey", "secretKey"})
    if unknown:
        raise ConfigError(where, unknown[0], "unknown key (RelayMQ authenticates accounts; it has no per-topic permissions)")
    access_key, secret_key = entry.get("accessKey"), entry.get("secretKey")
    if not isinstance(access_key, str) or not access_key:
        raise ConfigError(where, "accessKey", "is required (a non-empty string)")
    if len(access_key) > MAX_KEY_CHARS or not _ACCESS_KEY.fullmatch(access_key) or "," in access_key or "/" in access_key:
        raise ConfigError(where, "accessKey", f"must be 1..{MAX_KEY_CHARS} printable ASCII characters without space, ',' or '/'")
    if not isinstance(secret_key, str) or not secret_key:
        raise ConfigError(where, "secretKey", "is required (a non-empty string)")
    if len(secret_key) > MAX_KEY_CHARS:
        raise ConfigError(where, "secretKey", f"is longer than {MAX_KEY_CHARS} characters")
    return access_key, secret_key


def accounts_from_document(document: Mapping[str, Any], where: str) -> Accounts:
    """The ``[[accounts]]`` tables of an accounts file; :class:`ConfigError` names file and key."""
    unknown = sorted(set(document) - {"accounts"})
    if unknown:
        raise ConfigError(where, unknown[0], "unknown key (expected only [[accounts]] tables)")
    entries = document.get("accounts")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(where, "accounts", "must be a non-empty list of [[accounts]] tables")
    if len(entries) > MAX_ACCOUNTS:
        raise ConfigError(where, "accounts", f"more than {MAX_ACCOUNTS} accounts")
    secret_keys: dict[str, str] = {}
    for index, entry in enumerate(entries, start=1):
        access_key, secret_key = _account(entry, f"{where} [[accounts]] #{index}")
        if access_key in secret_keys:
            raise ConfigError(f"{where} [[accounts]] #{index}", "accessKey", f"{access_key!r} is given twice")
        secret_keys[access_key] = secret_key
    return Accounts(secret_keys)
