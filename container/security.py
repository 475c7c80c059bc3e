"""Reading the files the client endpoint's security needs: TLS certificate and key, accounts.

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

import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from container.config import ContainerConfig
from container.config_loader import load_config_file
from metadata.authentication import Accounts, accounts_from_document
from metadata.config import ConfigError
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


def load_accounts(config: MessagingConfig, where: str) -> Accounts | None:
    """The accounts authenticated calls are checked against; None when none are configured."""
    if not config.authentication_accounts_file:
        if config.authentication_enabled:
            raise ConfigError(where, "authenticationAccountsFile", "is required when authenticationEnabled is true")
        return None
    path = resolve(Path(where).resolve().parent, config.authentication_accounts_file)
    if path.suffix.lower() != ".toml":
        raise ConfigError(where, "authenticationAccountsFile", f"{path}: must be a .toml file of [[accounts]] tables")
    _read(where, "authenticationAccountsFile", path)  # names the config key when the file is missing
    return accounts_from_document(load_config_file(path), str(path))
