"""A self-signed certificate for 127.0.0.1 and localhost, made with the ``openssl`` CLI.

P-256 keys: generating one takes milliseconds.  The certificate names 127.0.0.1 as an IP
subjectAltName, which is what grpc checks for an ``ipv4:127.0.0.1:PORT`` target.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed_certificate(folder: Path, name: str = "server") -> tuple[Path, Path]:
    """(certificate, key) PEM files in ``folder``; skips the test when openssl is missing."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}-cert.pem", folder / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return cert, key
