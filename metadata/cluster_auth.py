"""The cluster credential: proof that a call or a replication link comes from a cluster member.

Every member of a cluster (nameservers, controllers, containers) reads the same secret
(``clusterAuthenticationSecretFile``).  The secret never travels; what travels is an
HMAC-SHA256 keyed with it:

* **A gRPC call** carries three metadata entries (:data:`TIME_HEADER`, :data:`NONCE_HEADER`,
  :data:`SIGNATURE_HEADER`): the caller's wall-clock milliseconds, a fresh random nonce, and
  the HMAC of ``method \\n time \\n nonce``.  The server refuses a call whose time is further
  than the window from its own, whose signature does not match, or whose nonce it has seen
  inside the window (:class:`ClusterVerifier`'s replay cache; a nonce is forgotten once its
  time has left the window, when a replay would be refused by the clock anyway).  The method
  is signed, so a captured proof is good for its own RPC only.  The request body is not signed
  (as the clients' signature; TLS is what protects a body on a hostile path).
* **A replication link** proves both ways over nonces (:func:`link_proof`): after the
  preamble the master sends a fresh nonce, the slave answers its own nonce and the HMAC of
  both under the role ``slave``, the master checks it and answers the HMAC under the role
  ``master``.  Neither side can be replayed (the other side's nonce is fresh each time) and a
  slave also knows its master is a member.

Pure: time and nonces are inputs; the drivers (``services.cluster_auth``,
``services.ha.wire``) read the clock and ``os.urandom``.
"""
from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

TIME_HEADER = "x-relaymq-cluster-time"
NONCE_HEADER = "x-relaymq-cluster-nonce"
SIGNATURE_HEADER = "x-relaymq-cluster-signature"
NONCE_MAX_CHARS = 64
SECRET_MIN_BYTES = 16
LINK_NONCE_BYTES = 16
LINK_PROOF_BYTES = 32


class ProofRejection(str, Enum):
    """Why a call's proof is refused (the server's log line names it; the caller sees UNAUTHENTICATED)."""
    MISSING = "MISSING"                  # no cluster proof at all (an outsider, or a member without the key)
    MALFORMED = "MALFORMED"              # a proof whose time, nonce or signature does not parse
    CLOCK_SKEW = "CLOCK_SKEW"            # its time is outside the window around ours
    BAD_SIGNATURE = "BAD_SIGNATURE"      # signed with another secret (or tampered)
    REPLAYED = "REPLAYED"                # a nonce already seen inside the window
    REPLAY_CACHE_FULL = "REPLAY_CACHE_FULL"  # more fresh nonces than the cache holds: refused, not forgotten


@dataclass(frozen=True)
class ClusterSecret:
    """The shared key; its repr never shows it."""
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        assert len(self.key) >= SECRET_MIN_BYTES, "a cluster secret is checked for length where it is read"


def parse_secret(text: str) -> ClusterSecret | str:
    """The secret of a secret file's text (surrounding whitespace dropped), or why it is unusable."""
    key = text.strip().encode("utf-8")
    if len(key) < SECRET_MIN_BYTES:
        return f"the secret must be at least {SECRET_MIN_BYTES} bytes (it has {len(key)})"
    return ClusterSecret(key)


def signature(secret: ClusterSecret, method: str, time_ms: int, nonce: str) -> str:
    message = f"{method}\n{time_ms}\n{nonce}".encode("utf-8")
    return hmac.new(secret.key, message, hashlib.sha256).hexdigest()


def sign(secret: ClusterSecret, method: str, now_ms: int, nonce: str) -> tuple[tuple[str, str], ...]:
    """The metadata entries a call to ``method`` (``/package.Service/Method``) carries."""
    assert 0 < len(nonce) <= NONCE_MAX_CHARS
    return ((TIME_HEADER, str(now_ms)), (NONCE_HEADER, nonce),
            (SIGNATURE_HEADER, signature(secret, method, now_ms, nonce)))


class ClusterVerifier:
    """Checks calls' proofs; owns the replay cache (at most ``max_nonces`` nonces)."""

    def __init__(self, secret: ClusterSecret, window_ms: int, max_nonces: int):
        assert window_ms > 0 and max_nonces > 0
        self._secret, self.window_ms, self.max_nonces = secret, window_ms, max_nonces
        self._seen: OrderedDict[str, int] = OrderedDict()  # nonce -> when it may be forgotten, in arrival order
        self._latest_expiry = 0

    def verify(self, metadata: Mapping[str, str], method: str, now_ms: int) -> ProofRejection | None:
        """None when the call is proven (its nonce is then remembered), else why not."""
        time_text, nonce, given = (metadata.get(TIME_HEADER), metadata.get(NONCE_HEADER),
                                   metadata.get(SIGNATURE_HEADER))
        if time_text is None and nonce is None and given is None:
            return ProofRejection.MISSING
        if not (time_text and nonce and given) or len(nonce) > NONCE_MAX_CHARS or len(time_text) > 20 \
                or not (time_text.isascii() and time_text.isdigit() and nonce.isascii() and given.isascii()):
            return ProofRejection.MALFORMED  # non-ASCII: compare_digest refuses it, int() takes "²" for a digit
        time_ms = int(time_text)
        if abs(time_ms - now_ms) > self.window_ms:
            return ProofRejection.CLOCK_SKEW
        if not hmac.compare_digest(signature(self._secret, method, time_ms, nonce), given):
            return ProofRejection.BAD_SIGNATURE
        self._forget_expired(now_ms)
        if nonce in self._seen:
            return ProofRejection.REPLAYED
        if len(self._seen) >= self.max_nonces:
            return ProofRejection.REPLAY_CACHE_FULL
        self._remember(nonce, time_ms + self.window_ms)
        return None

    def _remember(self, nonce: str, expiry_ms: int) -> None:
        # kept in arrival order; an expiry earlier than the newest one's is raised to it so that the
        # oldest entry always expires first (a nonce is kept a little longer, never shorter)
        self._latest_expiry = max(self._latest_expiry, expiry_ms)
        self._seen[nonce] = self._latest_expiry

    def _forget_expired(self, now_ms: int) -> None:
        while self._seen:
            nonce, expiry = next(iter(self._seen.items()))
            if expiry >= now_ms:
                return
            del self._seen[nonce]

    @property
    def remembered(self) -> int:
        return len(self._seen)


def link_proof(secret: ClusterSecret, role: str, master_nonce: bytes, slave_nonce: bytes) -> bytes:
    """What ``role`` ("slave" or "master") sends to prove it holds the secret on one link."""
    assert role in ("slave", "master")
    assert len(master_nonce) == LINK_NONCE_BYTES and len(slave_nonce) == LINK_NONCE_BYTES
    return hmac.new(secret.key, b"relaymq-ha-link\n" + role.encode() + b"\n" + master_nonce + slave_nonce,
                    hashlib.sha256).digest()


def link_proof_valid(secret: ClusterSecret, role: str, master_nonce: bytes, slave_nonce: bytes, proof: bytes) -> bool:
    return len(proof) == LINK_PROOF_BYTES and hmac.compare_digest(
        link_proof(secret, role, master_nonce, slave_nonce), proof)
