"""TLS certificate, key and accounts files: read once at load, one clear error for each problem."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from container.config import ContainerConfig, load_container_config
from container.security import load_accounts, load_tls_material
from metadata.config import ConfigError
from services.messaging.config import MessagingConfig
from tests.support.tls import self_signed_certificate


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pem")
    cert, key = self_signed_certificate(folder)
    other_cert, other_key = self_signed_certificate(folder, "other")
    return {"cert": cert, "key": key, "other_key": other_key, "folder": folder}


def tls_config(cert="", key="", port=18443) -> ContainerConfig:
    return ContainerConfig(grpc_tls_port=port, tls_server_cert_path=str(cert), tls_server_key_path=str(key))


def refused(call, *args) -> str:
    with pytest.raises(ConfigError) as caught:
        call(*args)
    return str(caught.value)


def test_off_without_a_tls_port(tmp_path):
    assert load_tls_material(ContainerConfig(), str(tmp_path / "c.toml")) is None


def test_certificate_and_key_are_read_and_paths_are_relative_to_the_config_file(pem, tmp_path):
    folder = tmp_path / "conf"
    folder.mkdir()
    shutil.copy(pem["cert"], folder / "cert.pem")
    shutil.copy(pem["key"], folder / "key.pem")
    material = load_tls_material(tls_config("cert.pem", "key.pem"), str(folder / "c.toml"))
    assert material.certificate_chain == pem["cert"].read_bytes() and material.private_key == pem["key"].read_bytes()
    assert material.cert_path == folder / "cert.pem"


def test_cert_and_key_are_required_with_a_tls_port(pem, tmp_path):
    where = str(tmp_path / "c.toml")
    assert "tlsServerCertPath: is required" in refused(load_tls_material, tls_config("", pem["key"]), where)
    assert "tlsServerKeyPath: is required" in refused(load_tls_material, tls_config(pem["cert"], ""), where)


def test_missing_files_name_key_and_file(pem, tmp_path):
    where = str(tmp_path / "c.toml")
    message = refused(load_tls_material, tls_config(tmp_path / "nope.pem", pem["key"]), where)
    assert where in message and "tlsServerCertPath" in message and "nope.pem: file not found" in message
    message = refused(load_tls_material, tls_config(pem["cert"], tmp_path / "gone.pem"), where)
    assert "tlsServerKeyPath" in message and "gone.pem: file not found" in message


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(pem, tmp_path):
    locked = tmp_path / "locked.pem"
    shutil.copy(pem["key"], locked)
    locked.chmod(0)
    message = refused(load_tls_material, tls_config(pem["cert"], locked), str(tmp_path / "c.toml"))
    assert "tlsServerKeyPath" in message and "cannot be read" in message


@pytest.mark.parametrize("content, reason", [
    ("hello\n", "holds no PEM certificate"),
    ("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n", "not a valid PEM certificate"),
    (b"\x30\x82\x01\x00binary", "not a PEM file"),
])
def test_bad_certificate(pem, tmp_path, content, reason):
    bad = tmp_path / "bad-cert.pem"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    message = refused(load_tls_material, tls_config(bad, pem["key"]), str(tmp_path / "c.toml"))
    assert "tlsServerCertPath" in message and "bad-cert.pem" in message and reason in message


def test_a_key_given_as_the_certificate_is_refused(pem, tmp_path):
    message = refused(load_tls_material, tls_config(pem["key"], pem["key"]), str(tmp_path / "c.toml"))
    assert "tlsServerCertPath" in message and "holds no PEM certificate" in message


def test_bad_keys(pem, tmp_path):
    where = str(tmp_path / "c.toml")
    assert "holds no PEM private key" in refused(load_tls_material, tls_config(pem["cert"], pem["cert"]), where)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n")
    message = refused(load_tls_material, tls_config(pem["cert"], garbage), where)
    assert "tlsServerKeyPath" in message and "garbage.pem: not a PEM private key of the certificate" in message
    message = refused(load_tls_material, tls_config(pem["cert"], pem["other_key"]), where)
    assert "tlsServerKeyPath" in message and "mismatch" in message


def test_an_encrypted_key_is_refused_without_prompting(pem, tmp_path):
    encrypted = tmp_path / "encrypted.pem"
    subprocess.run(["openssl", "pkey", "-in", str(pem["key"]), "-aes256", "-passout", "pass:secret", "-out", str(encrypted)],
                   check=True, capture_output=True, timeout=30)
    message = refused(load_tls_material, tls_config(pem["cert"], encrypted), str(tmp_path / "c.toml"))
    assert "tlsServerKeyPath" in message and "encrypted" in message


def test_tls_port_must_differ_from_the_plaintext_port(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("grpcServerPort = 18081\ngrpcTlsPort = 18081\n")
    message = refused(load_container_config, path)
    assert str(path) in message and "grpcTlsPort" in message


def test_accounts_are_off_by_default_and_required_when_enabled(tmp_path):
    where = str(tmp_path / "c.toml")
    assert load_accounts(MessagingConfig(), where) is None
    message = refused(load_accounts, MessagingConfig(authentication_enabled=True), where)
    assert where in message and "authenticationAccountsFile: is required" in message


def test_accounts_file_is_read_relative_to_the_config_file(tmp_path):
    (tmp_path / "acl.toml").write_text('[[accounts]]\naccessKey = "rocketmq2"\nsecretKey = "12345678"\n')
    accounts = load_accounts(MessagingConfig(authentication_enabled=True, authentication_accounts_file="acl.toml"),
                             str(tmp_path / "c.toml"))
    assert accounts.secret_key("rocketmq2") == "12345678"


@pytest.mark.parametrize("name, content, reason", [
    ("missing.toml", None, "authenticationAccountsFile: " ),
    ("acl.yml", "accounts: []", "must be a .toml file"),
    ("bad.toml", "[[accounts]\n", "invalid TOML"),
    ("empty.toml", "", "accounts: must be a non-empty list"),
    ("nokey.toml", '[[accounts]]\nsecretKey = "x"\n', "accessKey: is required"),
])
def test_bad_accounts_files(tmp_path, name, content, reason):
    if content is not None:
        (tmp_path / name).write_text(content)
    message = refused(load_accounts, MessagingConfig(authentication_enabled=True, authentication_accounts_file=name),
                      str(tmp_path / "c.toml"))
    assert name in message and reason in message
