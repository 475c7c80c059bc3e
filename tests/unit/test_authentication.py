"""The MQv2-HMAC-SHA1 header parser, the verifier and the accounts file's rules."""
from __future__ import annotations

import calendar
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.authentication import (Accounts, AuthorizationError, Rejection, accounts_from_document,
                                     authorization_value, parse_authorization, parse_date_time, sign, verify)
from metadata.config import ConfigError

ACCOUNTS = Accounts({"alice": "alice-secret", "bob": "s3cr3t"})
DATE_TIME = "20260315T120000Z"
NOW_MS = calendar.timegm((2026, 3, 15, 12, 0, 5, 0, 0, 0)) * 1000
SKEW_MS = 900_000


def check(authorization: str, date_time: str = DATE_TIME, now_ms: int = NOW_MS, offset_ms: int = 0, skew_ms: int = SKEW_MS):
    return verify(ACCOUNTS, authorization, date_time, now_ms, offset_ms, skew_ms)


def test_signature_is_the_lowercase_hex_hmac_sha1_of_the_date_time():
    expected = hmac.new(b"alice-secret", DATE_TIME.encode(), hashlib.sha1).hexdigest()
    assert sign("alice-secret", DATE_TIME) == expected
    assert authorization_value("alice", "alice-secret", DATE_TIME) == \
        f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature={expected}"


def test_the_official_clients_header_parses():
    signature = sign("s3cr3t", DATE_TIME)
    header = parse_authorization(f"MQv2-HMAC-SHA1 Credential=bob, SignedHeaders=x-mq-date-time, Signature={signature}")
    assert (header.access_key, header.signature) == ("bob", signature)


def test_credential_scope_after_a_slash_and_unknown_items_are_ignored_as_the_proxy_does():
    signature = sign("s3cr3t", DATE_TIME).upper()
    header = parse_authorization(f"MQv2-HMAC-SHA1 Credential=bob/2026/rmq, Extra=1,SignedHeaders=X-MQ-DATE-TIME,Signature={signature}")
    assert header.access_key == "bob" and header.signature == signature.lower()


def test_empty_credential_parses_as_no_access_key():
    assert parse_authorization(f"MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature={'0' * 40}").access_key == ""


@pytest.mark.parametrize("text", [
    "", "MQv2-HMAC-SHA1", "Bearer abc", "MQv2-HMAC-SHA256 Credential=a, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time",
    "MQv2-HMAC-SHA1 Credential=a, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=host, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=" + "g" * 40,
    "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=" + "0" * 39,
    "MQv2-HMAC-SHA1 Credential=a, Credential=b, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=a b, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=é, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 junk, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
    "MQv2-HMAC-SHA1 Credential=" + "a" * 1100 + ", SignedHeaders=x-mq-date-time, Signature=" + "0" * 40,
])
def test_malformed_headers_raise_the_parse_error(text):
    with pytest.raises(AuthorizationError):
        parse_authorization(text)


@pytest.mark.parametrize("text, valid", [
    ("20260315T120000Z", True), ("19700101T000000Z", True), ("20240229T235959Z", True),
    ("20230229T000000Z", False), ("20261301T000000Z", False), ("20260315T240000Z", False), ("20260315T126000Z", False),
    ("20260315T120000", False), ("2026-03-15T12:00:00Z", False), ("", False), ("٢٠٢٦٠٣١٥T120000Z", False),
    ("20260315T120000Z\n", False), ("19691231T235959Z", False),
])
def test_date_time_format(text, valid):
    assert (parse_date_time(text) is not None) == valid


def test_a_correct_signature_is_accepted_and_hex_case_does_not_matter():
    assert check(authorization_value("alice", "alice-secret", DATE_TIME)) is None
    upper = f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature={sign('alice-secret', DATE_TIME).upper()}"
    assert check(upper) is None


@pytest.mark.parametrize("authorization, date_time, reason", [
    ("", DATE_TIME, Rejection.NO_AUTHORIZATION),
    ("MQv2-HMAC-SHA1 nonsense", DATE_TIME, Rejection.MALFORMED_AUTHORIZATION),
    (authorization_value("alice", "alice-secret", DATE_TIME), "", Rejection.NO_DATE_TIME),
    (authorization_value("alice", "alice-secret", "2026-03-15"), "2026-03-15", Rejection.MALFORMED_DATE_TIME),
    (authorization_value("", "", DATE_TIME), DATE_TIME, Rejection.NO_ACCESS_KEY),
    (authorization_value("mallory", "alice-secret", DATE_TIME), DATE_TIME, Rejection.UNKNOWN_ACCESS_KEY),
    (authorization_value("alice", "wrong", DATE_TIME), DATE_TIME, Rejection.BAD_SIGNATURE),
    (authorization_value("alice", "s3cr3t", DATE_TIME), DATE_TIME, Rejection.BAD_SIGNATURE),  # bob's secret
    (authorization_value("alice", "alice-secret", "20260315T115959Z"), DATE_TIME, Rejection.BAD_SIGNATURE),  # signed another time
])
def test_refusals_are_named(authorization, date_time, reason):
    assert check(authorization, date_time) is reason


def test_date_time_skew_is_bounded_against_utc_or_the_servers_local_time():
    header = authorization_value("bob", "s3cr3t", DATE_TIME)
    assert check(header, now_ms=NOW_MS + SKEW_MS - 5_000) is None
    assert check(header, now_ms=NOW_MS + SKEW_MS) is Rejection.DATE_TIME_SKEWED
    assert check(header, now_ms=NOW_MS - SKEW_MS - 10_000) is Rejection.DATE_TIME_SKEWED
    # a client at UTC+8 writes its local time with a Z: accepted by a server in the same zone
    local = "20260315T200000Z"
    assert check(authorization_value("bob", "s3cr3t", local), local, offset_ms=8 * 3_600_000) is None
    assert check(authorization_value("bob", "s3cr3t", local), local, offset_ms=0) is Rejection.DATE_TIME_SKEWED
    assert check(authorization_value("bob", "s3cr3t", local), local, skew_ms=0) is None  # 0: not checked


headers = st.one_of(
    st.text(max_size=200),
    st.builds(lambda parts, sep: "MQv2-HMAC-SHA1 " + sep.join(parts),
              st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["Credential=a", "SignedHeaders=x-mq-date-time",
                                                                         "Signature=" + "a" * 40, "=", ",", "Credential=a/b"])),
                       max_size=5),
              st.sampled_from([",", ", ", " ,", ",,"])),
)


@settings(max_examples=300, deadline=None)
@given(headers)
def test_the_parser_raises_only_its_own_error(text):
    try:
        header = parse_authorization(text)
    except AuthorizationError:
        return
    assert len(header.signature) == 40 and header.signature == header.signature.lower()


@settings(max_examples=300, deadline=None)
@given(headers, st.text(max_size=30), st.integers(-2**62, 2**62), st.integers(-50_400_000, 50_400_000), st.integers(0, 10**9))
def test_verify_answers_a_reason_or_none_and_never_raises(text, date_time, now_ms, offset_ms, skew_ms):
    assert verify(ACCOUNTS, text, date_time, now_ms, offset_ms, skew_ms) is not None  # no valid signature in there


def test_accounts_file_document():
    accounts = accounts_from_document({"accounts": [{"accessKey": "rocketmq2", "secretKey": "12345678"}]}, "acl.toml")
    assert accounts.secret_key("rocketmq2") == "12345678" and accounts.secret_key("other") is None


@pytest.mark.parametrize("document, key", [
    ({}, "accounts"),
    ({"accounts": []}, "accounts"),
    ({"accounts": "x"}, "accounts"),
    ({"accounts": [{"accessKey": "a"}]}, "secretKey"),
    ({"accounts": [{"secretKey": "a"}]}, "accessKey"),
    ({"accounts": [{"accessKey": "a b", "secretKey": "s"}]}, "accessKey"),
    ({"accounts": [{"accessKey": "a,b", "secretKey": "s"}]}, "accessKey"),
    ({"accounts": [{"accessKey": "a/b", "secretKey": "s"}]}, "accessKey"),
    ({"accounts": [{"accessKey": "a", "secretKey": ""}]}, "secretKey"),
    ({"accounts": [{"accessKey": "a", "secretKey": "s", "topicPerms": ["t=PUB"]}]}, "topicPerms"),
    ({"accounts": [{"accessKey": "a", "secretKey": "s"}, {"accessKey": "a", "secretKey": "t"}]}, "accessKey"),
    ({"accounts": [{"accessKey": "a", "secretKey": "s"}], "globalWhiteRemoteAddresses": []}, "globalWhiteRemoteAddresses"),
    ({"accounts": [1]}, "must be a table"),
])
def test_bad_accounts_name_file_and_key(document, key):
    with pytest.raises(ConfigError) as caught:
        accounts_from_document(document, "acl.toml")
    assert "acl.toml" in str(caught.value) and key in str(caught.value)
