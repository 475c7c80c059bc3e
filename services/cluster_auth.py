"""The cluster credential on the wire: its keys, the signing channel and the checking server.

Rules (the decision is ``metadata.cluster_auth``'s; this module reads clocks, files and nonces):

* One credential per process (:func:`install`, at start, from ``clusterAuthenticationSecretFile``):
  a process is a member of one cluster.  Every channel to an internal port is made by
  :func:`internal_channel`, which signs each call with the installed credential (none
  installed: plain, as before).
* Every internal server is made with :func:`server_interceptors`: with a credential installed,
  a call without a valid proof is refused with ``UNAUTHENTICATED`` before any servicer sees
  it, and logged as one WARNING line naming the peer, the service and the reason, at most
  once per (peer host, service) per ``LOG_INTERVAL_S`` (with the count of the ones not logged),
  and counted in ``relaymq_cluster_auth_refused_total{service, reason}``.
* Exempt: the gRPC health service (read-only liveness, probed by orchestrators) and, where
  authorization is on, the admin services, which ``services.access.admin_gate`` checks with
  the caller's user signature (so the ``relaymq admin`` operator signs as a user).
* A standalone nameserver or controller and a container each check, at start, that an internal
  port bound beyond loopback has a credential (:func:`check_internal_binds`), unless
  ``allowUnauthenticatedInternalPorts``.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import grpc

from metadata.cluster_auth import ClusterSecret, ClusterVerifier, ProofRejection, parse_secret, sign
from metadata.config import ConfigError, bind, config_field
from scheduler.clock import SystemClock
from services import metrics

log = logging.getLogger(__name__)
LOG_INTERVAL_S = 10.0
HEALTH_PREFIX = "/grpc.health.v1.Health/"
ADMIN_PREFIXES = ("/relaymq.internal.v1.BrokerAdmin/", "/relaymq.internal.v1.AclAdmin/")
SECRET_FILE_ENV = "RELAYMQ_CLUSTER_SECRET_FILE"


@dataclass(frozen=True)
class ClusterAuthConfig:
    secret_file: str = config_field(
        "clusterAuthenticationSecretFile", "", unit="path",
        doc="file holding the cluster secret (at least 16 bytes; relative to the config file): every "
            "cluster-internal call and replication link must prove it (docs/security.md); empty: off (ours)")
    max_clock_skew_ms: int = config_field(
        "clusterAuthenticationMaxClockSkewMillis", 60_000, unit="ms", minimum=1_000, maximum=3_600_000,
        doc="how far a signed internal call's time may be from the server's (ours)")
    max_nonces: int = config_field(
        "clusterAuthenticationMaxNonces", 200_000, minimum=1_000, maximum=10_000_000,
        doc="nonces a server remembers against replays within the skew window; past it fresh calls are "
            "refused (REPLAY_CACHE_FULL) (ours)")
    allow_unauthenticated_internal_ports: bool = config_field(
        "allowUnauthenticatedInternalPorts", False,
        doc="start with internal ports (nameserver, controller, listenPort, haListenPort) bound beyond "
            "loopback and no cluster secret; refused otherwise (ours)")


class ClusterCredential:
    """The secret, the replay cache of this process's servers and the clock they read."""

    def __init__(self, secret: ClusterSecret, max_clock_skew_ms: int = 60_000, max_nonces: int = 200_000,
                 now_ms: Callable[[], int] | None = None):
        """``now_ms``: wall-clock milliseconds (the members compare their clocks), the system's by default."""
        self.secret = secret
        self.verifier = ClusterVerifier(secret, max_clock_skew_ms, max_nonces)
        self._now_ms = now_ms or SystemClock().now_ms

    def proof(self, method: str) -> tuple[tuple[str, str], ...]:
        return sign(self.secret, method, self._now_ms(), os.urandom(16).hex())

    def verify(self, metadata: Mapping[str, str], method: str) -> ProofRejection | None:
        return self.verifier.verify(metadata, method, self._now_ms())


_installed: ClusterCredential | None = None


def install(credential: ClusterCredential | None) -> None:
    """This process's credential (None: off); set once at start (tests set and reset it)."""
    global _installed
    _installed = credential


def installed() -> ClusterCredential | None:
    return _installed


def read_secret_file(path: Path, where: str, key: str = "clusterAuthenticationSecretFile") -> ClusterSecret:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(where, key, f"cannot read {path}: {exc}") from None
    secret = parse_secret(text)
    if isinstance(secret, str):
        raise ConfigError(where, key, f"{path}: {secret}")
    return secret


def load_cluster_auth(values: Mapping[str, Any], where: str) -> tuple[ClusterAuthConfig, ClusterCredential | None]:
    """Bind the keys and read the secret file (relative to the config file ``where``)."""
    config = bind(ClusterAuthConfig, values, where)
    if not config.secret_file:
        return config, None
    path = Path(config.secret_file)
    if not path.is_absolute():
        path = Path(where).parent / path
    secret = read_secret_file(path, where)
    return config, ClusterCredential(secret, config.max_clock_skew_ms, config.max_nonces)


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


INTERNAL_PORTS_OF = {"adminBindAddress": "internal ports (listenPort, haListenPort)",
                     "bindAddress": "the nameserver's port (listenPort)",
                     "controllerDLegerPeers": "the controller's port (its peer address)"}


def check_internal_binds(where: str, config: ClusterAuthConfig, binds: Iterable[tuple[str, str]]) -> None:
    """Refuse an internal port (``(key, host)``) bound beyond loopback without a cluster secret."""
    if config.secret_file or config.allow_unauthenticated_internal_ports:
        return
    for key, host in binds:
        if not is_loopback(host):
            ports = INTERNAL_PORTS_OF.get(key, "internal ports")
            raise ConfigError(where, key, f"binds {ports} to {host or 'every interface'!s} without "
                                          "internal authentication: set clusterAuthenticationSecretFile "
                                          "(docs/security.md), bind to loopback, or set "
                                          "allowUnauthenticatedInternalPorts = true to accept the risk")


# -- client side -------------------------------------------------------------------------

def _method_name(method: Any) -> str:
    return method.decode() if isinstance(method, bytes) else str(method)


def _signed(credential: ClusterCredential, details: Any) -> Any:
    metadata = list(details.metadata or ())
    metadata.extend(credential.proof(_method_name(details.method)))
    return grpc.aio.ClientCallDetails(details.method, details.timeout, tuple(metadata), details.credentials,
                                      details.wait_for_ready)


class _SignUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, credential: ClusterCredential):
        self._credential = credential

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(_signed(self._credential, client_call_details), request)


class _SignUnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, credential: ClusterCredential):
        self._credential = credential

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(_signed(self._credential, client_call_details), request)


class _SignStreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, credential: ClusterCredential):
        self._credential = credential

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(_signed(self._credential, client_call_details), request_iterator)


class _SignStreamStream(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, credential: ClusterCredential):
        self._credential = credential

    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(_signed(self._credential, client_call_details), request_iterator)


def client_interceptors(credential: ClusterCredential | None) -> list | None:
    if credential is None:
        return None
    return [kind(credential) for kind in (_SignUnaryUnary, _SignUnaryStream, _SignStreamUnary, _SignStreamStream)]


def internal_channel(address: str, options: list | None = None,
                     credential: ClusterCredential | None = None) -> grpc.aio.Channel:
    """A channel to an internal port of the cluster, signing every call (the installed credential
    unless one is given)."""
    return grpc.aio.insecure_channel(address, options=options,
                                     interceptors=client_interceptors(credential or _installed))


class _SignSync(grpc.UnaryUnaryClientInterceptor):
    """The blocking channels' signer (``relaymq offset-diff``'s admin calls are unary)."""

    def __init__(self, credential: ClusterCredential):
        self._credential = credential

    def intercept_unary_unary(self, continuation, client_call_details, request):
        metadata = [*(client_call_details.metadata or ()), *self._credential.proof(_method_name(client_call_details.method))]
        return continuation(_SyncCallDetails(client_call_details.method, client_call_details.timeout, metadata,
                                             client_call_details.credentials, client_call_details.wait_for_ready,
                                             getattr(client_call_details, "compression", None)), request)


class _SyncCallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = credentials, wait_for_ready, compression


def internal_sync_channel(address: str, options: list | None = None,
                          credential: ClusterCredential | None = None) -> grpc.Channel:
    """A blocking channel to an internal port, signing every unary call (the installed credential)."""
    channel = grpc.insecure_channel(address, options=options)
    credential = credential or _installed
    return grpc.intercept_channel(channel, _SignSync(credential)) if credential is not None else channel


def install_from_file(path: str) -> None:
    """A command-line tool's credential (``--cluster-secret-file`` or :data:`SECRET_FILE_ENV`);
    ConfigError names the file when it is unusable."""
    install(ClusterCredential(read_secret_file(Path(path), path, "clusterAuthenticationSecretFile")))


# -- server side -------------------------------------------------------------------------

class RefusalLog:
    """One WARNING per (peer host, service) per interval, with the count of the ones not logged."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S, limit: int = 10_000,
                 now_s: Callable[[], float] = time.monotonic):
        self._interval_s, self._limit, self._now_s = interval_s, limit, now_s
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (logged at, refusals not logged)

    def refused(self, peer: str, method: str, reason: ProofRejection) -> None:
        host = peer.rsplit(":", 1)[0] if peer.count(":") == 1 or peer.startswith("ipv4:") else peer
        service = method.rsplit("/", 2)[1] if method.count("/") >= 2 else method
        key, now = (host, service), self._now_s()
        metrics.CLUSTER_AUTH_REFUSED.labels(service, reason.value).inc()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return
        if len(self._last) >= self._limit:
            self._last.clear()
        suppressed = f" ({last[1]} more refused since the last line)" if last and last[1] else ""
        log.warning("cluster authentication: refused %s from %s: %s (no valid proof of the cluster secret)%s",
                    method, peer, reason.value, suppressed)
        self._last[key] = (now, 0)


def _refusing_handler(handler: grpc.RpcMethodHandler, message: str, on_refused: Callable[[str], None]):
    async def refuse(request_or_iterator, context):
        on_refused(context.peer())
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if handler.request_streaming and handler.response_streaming:
        make = grpc.stream_stream_rpc_method_handler
    elif handler.request_streaming:
        make = grpc.stream_unary_rpc_method_handler
    elif handler.response_streaming:
        make = grpc.unary_stream_rpc_method_handler
    else:
        make = grpc.unary_unary_rpc_method_handler
    return make(refuse, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)


class ClusterAuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls without a valid proof, except the methods ``exempt`` accepts."""

    def __init__(self, credential: ClusterCredential, exempt: Callable[[str], bool] = lambda method: False,
                 refusals: RefusalLog | None = None):
        self._credential, self._exempt, self._refusals = credential, exempt, refusals or RefusalLog()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or self._exempt(method):
            return handler
        metadata = {key: value for key, value in (handler_call_details.invocation_metadata or ())
                    if isinstance(value, str)}
        reason = self._credential.verify(metadata, method)
        if reason is None:
            return handler
        return _refusing_handler(handler, f"cluster authentication failed: {reason.value}",
                                 lambda peer: self._refusals.refused(peer, method, reason))


def exempt_health(method: str) -> bool:
    return method.startswith(HEALTH_PREFIX)


def exempt_health_and_admin(method: str) -> bool:
    return method.startswith(HEALTH_PREFIX) or method.startswith(ADMIN_PREFIXES)


def server_interceptors(exempt: Callable[[str], bool] = exempt_health,
                        credential: ClusterCredential | None = None) -> list | None:
    """The interceptors an internal server is made with (none when no credential is installed)."""
    credential = credential or _installed
    return [ClusterAuthInterceptor(credential, exempt)] if credential is not None else None
