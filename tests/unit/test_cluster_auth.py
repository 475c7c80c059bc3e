"""The cluster credential's pure core: call proofs, the window, the replay cache, link proofs."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.cluster_auth import (LINK_NONCE_BYTES, NONCE_HEADER, SIGNATURE_HEADER, TIME_HEADER, ClusterSecret,
                                   ClusterVerifier, ProofRejection, link_proof, link_proof_valid, parse_secret, sign)

SECRET = ClusterSecret(b"the-cluster-secret-0123")
OTHER = ClusterSecret(b"another-cluster-secret-99")
METHOD = "/relaymq.internal.v1.NameserverService/RegisterBroker"
NOW = 1_700_000_000_000
WINDOW = 60_000


def verifier(max_nonces: int = 100) -> ClusterVerifier:
    return ClusterVerifier(SECRET, WINDOW, max_nonces)


def proof(secret=SECRET, method=METHOD, time_ms=NOW, nonce="n1") -> dict[str, str]:
    return dict(sign(secret, method, time_ms, nonce))


def tampered(field: str, value: str) -> dict[str, str]:
    return {**proof(), field: value}


@pytest.mark.parametrize("metadata, method, now_ms, expected", [
    (proof(), METHOD, NOW, None),
    (proof(time_ms=NOW - WINDOW), METHOD, NOW, None),                      # at the window's edge
    (proof(time_ms=NOW + WINDOW), METHOD, NOW, None),
    ({}, METHOD, NOW, ProofRejection.MISSING),
    ({"authorization": "MQv2-HMAC-SHA1 ..."}, METHOD, NOW, ProofRejection.MISSING),
    (proof(secret=OTHER), METHOD, NOW, ProofRejection.BAD_SIGNATURE),
    (proof(), "/relaymq.internal.v1.NameserverService/UnregisterBroker", NOW, ProofRejection.BAD_SIGNATURE),
    (tampered(NONCE_HEADER, "n2"), METHOD, NOW, ProofRejection.BAD_SIGNATURE),
    (tampered(TIME_HEADER, str(NOW + 1)), METHOD, NOW, ProofRejection.BAD_SIGNATURE),
    (tampered(SIGNATURE_HEADER, "00" * 32), METHOD, NOW, ProofRejection.BAD_SIGNATURE),
    (proof(time_ms=NOW - WINDOW - 1), METHOD, NOW, ProofRejection.CLOCK_SKEW),
    (proof(time_ms=NOW + WINDOW + 1), METHOD, NOW, ProofRejection.CLOCK_SKEW),
    (tampered(TIME_HEADER, "-5"), METHOD, NOW, ProofRejection.MALFORMED),
    (tampered(TIME_HEADER, "soon"), METHOD, NOW, ProofRejection.MALFORMED),
    (tampered(TIME_HEADER, "9" * 40), METHOD, NOW, ProofRejection.MALFORMED),
    (tampered(NONCE_HEADER, "x" * 65), METHOD, NOW, ProofRejection.MALFORMED),
    (tampered(NONCE_HEADER, ""), METHOD, NOW, ProofRejection.MALFORMED),
    ({TIME_HEADER: str(NOW)}, METHOD, NOW, ProofRejection.MALFORMED),      # a partial proof is not "missing"
], ids=lambda v: v.value if isinstance(v, ProofRejection) else None)
def test_a_call_proof_is_accepted_or_refused_for_one_named_reason(metadata, method, now_ms, expected):
    assert verifier().verify(metadata, method, now_ms) is expected


def test_a_replayed_proof_is_refused_inside_the_window_and_by_the_clock_after_it():
    check = verifier()
    assert check.verify(proof(), METHOD, NOW) is None
    assert check.verify(proof(), METHOD, NOW + 1) is ProofRejection.REPLAYED
    assert check.verify(proof(), METHOD, NOW + WINDOW) is ProofRejection.REPLAYED
    assert check.verify(proof(), METHOD, NOW + WINDOW + 1) is ProofRejection.CLOCK_SKEW


def test_nonces_are_forgotten_once_their_time_left_the_window():
    check = verifier()
    for index in range(10):
        assert check.verify(proof(nonce=f"n{index}", time_ms=NOW + index), METHOD, NOW + index) is None
    assert check.remembered == 10
    assert check.verify(proof(nonce="late", time_ms=NOW + WINDOW + 5), METHOD, NOW + WINDOW + 5) is None
    assert check.remembered == 6  # n0..n4 expired (their time + window < now); n5..n9 and late kept


def test_a_full_replay_cache_refuses_rather_than_forgets():
    check = verifier(max_nonces=3)
    for index in range(3):
        assert check.verify(proof(nonce=f"n{index}"), METHOD, NOW) is None
    assert check.verify(proof(nonce="n3"), METHOD, NOW) is ProofRejection.REPLAY_CACHE_FULL
    assert check.verify(proof(nonce="n0"), METHOD, NOW) is ProofRejection.REPLAYED
    assert check.verify(proof(nonce="n4", time_ms=NOW + WINDOW + 1), METHOD, NOW + WINDOW + 1) is None  # room again


@pytest.mark.parametrize("text, ok", [("", False), ("short", False), ("  fifteen-bytes  \n", False),
                                      ("sixteen-bytes-ok", True), ("  a-long-enough-secret \n", True)])
def test_a_secret_file_needs_sixteen_bytes_and_its_whitespace_is_dropped(text, ok):
    parsed = parse_secret(text)
    assert isinstance(parsed, ClusterSecret) is ok
    if ok:
        assert parsed.key == text.strip().encode()
        assert text.strip() not in repr(parsed)


@settings(max_examples=200, deadline=None)
@given(time_ms=st.integers(0, 2**53), nonce=st.text(st.characters(codec="ascii", exclude_categories=("Cc",)),
                                                     min_size=1, max_size=64),
       skew=st.integers(-2 * WINDOW, 2 * WINDOW), method=st.sampled_from([METHOD, "/a.B/C", "/grpc.x/Y"]))
def test_a_proof_of_the_secret_passes_exactly_when_inside_the_window_and_only_once(time_ms, nonce, skew, method):
    check = ClusterVerifier(SECRET, WINDOW, 10)
    metadata = dict(sign(SECRET, method, time_ms, nonce))
    first = check.verify(metadata, method, time_ms + skew)
    assert first is (None if abs(skew) <= WINDOW else ProofRejection.CLOCK_SKEW)
    if first is None:
        assert check.verify(metadata, method, time_ms + skew) is ProofRejection.REPLAYED
    assert ClusterVerifier(OTHER, WINDOW, 10).verify(metadata, method, time_ms) is ProofRejection.BAD_SIGNATURE


@settings(max_examples=200, deadline=None)
@given(headers=st.dictionaries(st.sampled_from([TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER, "other"]),
                               st.text(max_size=80)), now_ms=st.integers(0, 2**53))
def test_arbitrary_metadata_is_refused_with_a_reason_never_a_crash(headers, now_ms):
    assert isinstance(verifier().verify(headers, METHOD, now_ms), ProofRejection)


@settings(max_examples=100, deadline=None)
@given(master_nonce=st.binary(min_size=LINK_NONCE_BYTES, max_size=LINK_NONCE_BYTES),
       slave_nonce=st.binary(min_size=LINK_NONCE_BYTES, max_size=LINK_NONCE_BYTES),
       other_nonce=st.binary(min_size=LINK_NONCE_BYTES, max_size=LINK_NONCE_BYTES))
def test_a_link_proof_is_bound_to_the_secret_the_role_and_both_nonces(master_nonce, slave_nonce, other_nonce):
    slave = link_proof(SECRET, "slave", master_nonce, slave_nonce)
    assert link_proof_valid(SECRET, "slave", master_nonce, slave_nonce, slave)
    assert not link_proof_valid(OTHER, "slave", master_nonce, slave_nonce, slave)
    assert not link_proof_valid(SECRET, "master", master_nonce, slave_nonce, slave)  # a master's proof is no slave's
    if other_nonce != master_nonce:  # a proof recorded on one connection fails on the next (a fresh master nonce)
        assert not link_proof_valid(SECRET, "slave", other_nonce, slave_nonce, slave)
    assert not link_proof_valid(SECRET, "slave", master_nonce, slave_nonce, slave[:-1])
