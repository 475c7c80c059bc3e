"""The replication link's authentication step: both ends prove the cluster secret.

Rules:

* With a cluster credential installed (``services.cluster_auth``), the first frames after the
  preamble are three, before the slave's handshake: the slave's HELLO with a fresh nonce;
  the master's CHALLENGE with its own fresh nonce and its proof (``metadata.cluster_auth.
  link_proof`` over both nonces, role ``master``); the slave's PROOF (role ``slave``).  The
  secret never crosses the wire, and a recorded exchange is worth nothing on a new connection
  (the other end's nonce is new).  A slave also learns that its master is a member.
* A master refuses (closes, one rate-limited WARNING naming the peer) a connection whose first
  frame is not a HELLO (a slave without the secret, or anyone else) or whose PROOF is wrong;
  the real slaves' connections are untouched.
* A slave whose master answers no CHALLENGE, or a wrong proof, closes with a
  :class:`LinkAuthenticationError` naming the likely cause, and retries as after any failure.
* Without a credential the link is as before (no extra frames); a master without one closes
  a HELLO as a bad handshake.
"""
from __future__ import annotations

import os

from metadata.cluster_auth import (LINK_NONCE_BYTES, LINK_PROOF_BYTES, ClusterSecret, ProofRejection, link_proof,
                                   link_proof_valid)
from services.cluster_auth import RefusalLog, installed
from services.ha.wire import Link, WireError

HELLO = b"RMHA-AUTH-HELLO\x01"
CHALLENGE = b"RMHA-AUTH-CHALLENGE\x01"
PROOF = b"RMHA-AUTH-PROOF\x01"
LINK_METHOD = "replication link (haListenPort)"
REFUSALS = RefusalLog()


class LinkAuthenticationError(WireError):
    """The other end did not prove the cluster secret."""


def _installed_secret() -> ClusterSecret | None:
    credential = installed()
    return credential.secret if credential is not None else None


async def prove_to_master(link: Link, secret: ClusterSecret | None = None) -> None:
    """The slave's side, right after the preamble (nothing without a secret)."""
    secret = secret or _installed_secret()
    if secret is None:
        return
    slave_nonce = os.urandom(LINK_NONCE_BYTES)
    await link.send(HELLO + slave_nonce)
    got = await link.receive()
    if got is None:
        raise LinkAuthenticationError("the master closed the connection at cluster authentication (it has "
                                      "another clusterAuthenticationSecretFile, or none)")
    header = got[0]
    if not header.startswith(CHALLENGE) or len(header) != len(CHALLENGE) + LINK_NONCE_BYTES + LINK_PROOF_BYTES:
        raise LinkAuthenticationError("the master answered no cluster proof (it has no clusterAuthenticationSecretFile)")
    master_nonce, proof = header[len(CHALLENGE):-LINK_PROOF_BYTES], header[-LINK_PROOF_BYTES:]
    if not link_proof_valid(secret, "master", master_nonce, slave_nonce, proof):
        raise LinkAuthenticationError("the master's cluster proof is wrong (it has another cluster secret)")
    await link.send(PROOF + link_proof(secret, "slave", master_nonce, slave_nonce))


async def check_slave(link: Link, secret: ClusterSecret | None = None) -> bool:
    """The master's side, right after the preamble: True when the peer proved the secret (or
    none is installed); else the refusal is logged and the caller closes."""
    secret = secret or _installed_secret()
    if secret is None:
        return True
    reason = await _check(link, secret)
    if reason is not None:
        REFUSALS.refused(link.peer, LINK_METHOD, reason)
    return reason is None


async def _check(link: Link, secret: ClusterSecret) -> ProofRejection | None:
    got = await link.receive()
    if got is None or not got[0].startswith(HELLO):
        return ProofRejection.MISSING
    if len(got[0]) != len(HELLO) + LINK_NONCE_BYTES:
        return ProofRejection.MALFORMED
    slave_nonce, master_nonce = got[0][len(HELLO):], os.urandom(LINK_NONCE_BYTES)
    await link.send(CHALLENGE + master_nonce + link_proof(secret, "master", master_nonce, slave_nonce))
    got = await link.receive()
    if got is None:
        return ProofRejection.BAD_SIGNATURE  # the slave hung up on our proof: it holds another secret
    header = got[0]
    if not header.startswith(PROOF) or not link_proof_valid(secret, "slave", master_nonce, slave_nonce,
                                                            header[len(PROOF):]):
        return ProofRejection.BAD_SIGNATURE
    return None
