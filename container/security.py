"""Reading the files the client endpoint's security needs: TLS certificate and key, accounts,
users and ACLs; and the key combinations refused at start (:func:`check_access_keys`).

Rules:
- Read and checked once, before anything starts; every problem is a :class:`ConfigError`
  naming the config file, the key and the file it points to (no traceback, exit 2).
- Paths are relative to the container file's folder, as ``brokerConfigPaths`` are.
- The certificate must parse as PEM certificates and the key as an unencrypted PEM private
  key that matches the first certificate (checked with the ``ssl`` module, which reads them
  as grpcio's OpenSSL/BoringSSL will); grpcio then gets the bytes, not the paths.
- Files are at most ``MAX_FILE_BYTES``.
"""
from __future__ import annotations

import json
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from container.config import ContainerConfig
from container.config_loader import load_config_file
from metadata.authentication import Accounts, accounts_from_document
from metadata.config import ConfigError
from services.access.acl_replica import ReplicatedAclStore
from services.access.acl_store import AclStore
from services.admin.client import Credentials
from services.messaging.config import MessagingConfig

MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class TlsMaterial:
    certificate_chain: bytes
    private_key: bytes
    cert_path: Path
    key_path: Path


def resolve(base: Path, raw: str) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else base / path


def _read(where: str, key: str, path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(where, key, f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(where, key, f"{path}: is a directory") from None
    except OSError as exc:
        raise ConfigError(where, key, f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(where, key, f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return data


def _pem_text(where: str, key: str, path: Path, data: bytes, kind: str) -> str:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(where, key, f"{path}: not a PEM file (binary content; DER is not accepted)") from None
    if f"-----BEGIN {kind}" not in text and not (kind == "PRIVATE KEY" and "PRIVATE KEY-----" in text):
        raise ConfigError(where, key, f"{path}: holds no PEM {kind.lower()}")
    return text


def _check_certificate(where: str, path: Path, data: bytes) -> None:
    text = _pem_text(where, "tlsServerCertPath", path, data, "CERTIFICATE")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cadata=text)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(where, "tlsServerCertPath", f"{path}: not a valid PEM certificate ({_reason(exc)})") from None


def _check_key(where: str, cert_path: Path, key_path: Path, data: bytes) -> None:
    text = _pem_text(where, "tlsServerKeyPath", key_path, data, "PRIVATE KEY")
    if "ENCRYPTED" in text:
        raise ConfigError(where, "tlsServerKeyPath", f"{key_path}: is encrypted; give an unencrypted key")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert_path), str(key_path), password=lambda: b"")
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(where, "tlsServerKeyPath", f"{key_path}: not a PEM private key of the certificate in "
                                                     f"tlsServerCertPath ({_reason(exc)})") from None


def _reason(exc: Exception) -> str:
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc)).strip() or type(exc).__name__


def load_tls_material(config: ContainerConfig, where: str) -> TlsMaterial | None:
    """The TLS endpoint's certificate chain and key, or None when ``grpcTlsPort`` is 0."""
    if not config.grpc_tls_port:
        return None
    base = Path(where).resolve().parent
    paths = {}
    for key, raw in (("tlsServerCertPath", config.tls_server_cert_path), ("tlsServerKeyPath", config.tls_server_key_path)):
        if not raw:
            raise ConfigError(where, key, "is required when grpcTlsPort is set")
        paths[key] = resolve(base, raw)
    cert_path, key_path = paths["tlsServerCertPath"], paths["tlsServerKeyPath"]
    certificate = _read(where, "tlsServerCertPath", cert_path)
    private_key = _read(where, "tlsServerKeyPath", key_path)
    _check_certificate(where, cert_path, certificate)
    _check_key(where, cert_path, key_path, private_key)
    return TlsMaterial(certificate, private_key, cert_path, key_path)


DEFAULT_AUTHENTICATION_PROVIDER = "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"
DEFAULT_AUTHORIZATION_PROVIDER = "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider"


def check_access_keys(config: MessagingConfig, where: str) -> None:
    """The combinations of authentication and authorization keys RelayMQ refuses to start with."""
    if config.authentication_provider.strip() not in ("", DEFAULT_AUTHENTICATION_PROVIDER):
        raise ConfigError(where, "authenticationProvider", f"{config.authentication_provider!r}: only "
                                                           f"{DEFAULT_AUTHENTICATION_PROVIDER} (the MQv2-HMAC-SHA1 "
                                                           "signature) is supported")
    if config.authorization_provider.strip() not in ("", DEFAULT_AUTHORIZATION_PROVIDER):
        raise ConfigError(where, "authorizationProvider", f"{config.authorization_provider!r}: only "
                                                          f"{DEFAULT_AUTHORIZATION_PROVIDER} (ACL 2.0 policies) is "
                                                          "supported")
    if config.authorization_enabled and not config.authentication_enabled:
        raise ConfigError(where, "authorizationEnabled", "needs authenticationEnabled = true: without authentication "
                                                         "every caller could claim any user, a super user included "
                                                         "(RocketMQ #11178)")
    if config.authorization_enabled and not config.authorization_metadata_file:
        raise ConfigError(where, "authorizationMetadataFile", "is required when authorizationEnabled is true (the "
                                                              "users and ACLs to enforce)")
    if config.authorization_metadata_file and config.authentication_accounts_file:
        raise ConfigError(where, "authenticationAccountsFile", "give either it or authorizationMetadataFile: with "
                                                               "authorizationMetadataFile its users are the accounts")


def load_acl_store(config: MessagingConfig, where: str, controller_addresses: list[str] | None = None,
                   store_root: Path | None = None) -> AclStore | ReplicatedAclStore | None:
    """The users and ACLs of ``authorizationMetadataFile`` (version 1), None when it is not set.
    A file that does not parse is a ConfigError naming its line.  With ``controller_addresses``
    (the container's brokers run in controller mode) and authorization on, the users and ACLs
    are the controller's: the file only seeds it (:mod:`services.access.acl_replica`), and the
    copy is cached under ``store_root``."""
    check_access_keys(config, where)
    if not config.authorization_metadata_file:
        return None
    path = resolve(Path(where).resolve().parent, config.authorization_metadata_file)
    if path.suffix.lower() != ".toml":
        raise ConfigError(where, "authorizationMetadataFile", f"{path}: must be a .toml file of [[users]] and [[acls]]")
    _read(where, "authorizationMetadataFile", path)  # names the config key when the file is missing
    if controller_addresses and config.authorization_enabled:
        assert store_root is not None, "a replicated ACL store needs the store root for its cache"
        return ReplicatedAclStore.open(path, store_root, controller_addresses)
    return AclStore.open(path)


def load_accounts(config: MessagingConfig, where: str) -> Accounts | None:
    """The accounts authenticated calls are checked against; None when none are configured
    (or when ``authorizationMetadataFile`` gives them: :func:`load_acl_store`)."""
    check_access_keys(config, where)
    if not config.authentication_accounts_file:
        if config.authentication_enabled and not config.authorization_metadata_file:
            raise ConfigError(where, "authenticationAccountsFile", "is required when authenticationEnabled is true "
                                                                   "(or authorizationMetadataFile, whose users are "
                                                                   "then the accounts)")
        return None
    path = resolve(Path(where).resolve().parent, config.authentication_accounts_file)
    if path.suffix.lower() != ".toml":
        raise ConfigError(where, "authenticationAccountsFile", f"{path}: must be a .toml file of [[accounts]] tables")
    _read(where, "authenticationAccountsFile", path)  # names the config key when the file is missing
    return accounts_from_document(load_config_file(path), str(path))


def load_inner_credentials(config: MessagingConfig, where: str) -> Credentials | None:
    """``innerClientAuthenticationCredentials`` (RocketMQ's JSON), None when not set."""
    text = config.inner_client_authentication_credentials.strip()
    if not text:
        return None
    key = "innerClientAuthenticationCredentials"
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigError(where, key, 'is not JSON: write {"accessKey": "...", "secretKey": "..."}') from None
    if not isinstance(value, dict) or set(value) != {"accessKey", "secretKey"} or \
            not all(isinstance(v, str) and v for v in value.values()):
        raise ConfigError(where, key, 'must be {"accessKey": "...", "secretKey": "..."} with two non-empty strings')
    return Credentials(value["accessKey"], value["secretKey"])
