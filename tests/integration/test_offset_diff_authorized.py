"""``relaymq offset-diff`` against a container with authorization on (issue 25): its live
fetch and its live apply sign their admin calls as ``relaymq admin`` does, from
``--access-key/--secret-key`` or ``RELAYMQ_ACCESS_KEY``/``RELAYMQ_SECRET_KEY``; unsigned, the
container refuses them and the tool says how to sign (one line, exit 1).  The Spark job itself
is not run: the fetch and the masters' reads are what the container checks.
"""
from __future__ import annotations

import shutil

import pytest

from container.cli import CliError, build_parser
from container.cli_offset_diff import Progress, _fetch, _sign_admin_calls
from metadata.data_version import DataVersion
from services.admin.client import CALLER_CREDENTIALS
from services.offset_apply import AdminOffsetApi, MasterTarget
from tests.support.container_process import ROOT, ContainerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("offset-diff-authz")
    acl = tmp / "acl.toml"
    shutil.copy(ROOT / "conf" / "secure" / "acl.toml", acl)
    container = ContainerProcess(tmp / "data", extra={
        "authenticationEnabled": True, "authorizationEnabled": True, "authorizationMetadataFile": str(acl)}).start()
    try:
        yield container
    finally:
        container.stop()


def _args(container, tmp_path, *credentials):
    args = build_parser().parse_args(["offset-diff", "--replica", f"broker-a@127.0.0.1:{container.admin_port}",
                                      "--output", str(tmp_path), "--quiet", *credentials])
    args.progress = Progress(True)
    return args


@pytest.fixture(autouse=True)
def fresh_credentials():
    token = CALLER_CREDENTIALS.set(None)
    yield
    CALLER_CREDENTIALS.reset(token)


def test_unsigned_fetch_is_refused_with_a_hint(secured, tmp_path):
    args = _args(secured, tmp_path)
    _sign_admin_calls(args)
    with pytest.raises(CliError) as refused:
        _fetch(args)
    assert refused.value.code == 1 and "UNAUTHENTICATED" in str(refused.value) and "--access-key" in str(refused.value)


def test_fetch_signed_with_the_flags(secured, tmp_path):
    args = _args(secured, tmp_path, "--access-key", "admin", "--secret-key", "admin-secret")
    _sign_admin_calls(args)
    folder = _fetch(args)
    assert any((tmp_path / "fetch").iterdir()) and folder.startswith(str(tmp_path))


def test_fetch_and_master_reads_signed_from_the_environment(secured, tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYMQ_ACCESS_KEY", "admin")
    monkeypatch.setenv("RELAYMQ_SECRET_KEY", "admin-secret")
    args = _args(secured, tmp_path)
    _sign_admin_calls(args)
    _fetch(args)
    state = AdminOffsetApi().read(MasterTarget("broker-a", 0, f"127.0.0.1:{secured.admin_port}",
                                               DataVersion(0, 0, 0), ()), 5.0)
    assert state.role == "MASTER"


def test_a_user_without_get_on_the_cluster_is_forbidden(secured, tmp_path):
    args = _args(secured, tmp_path, "--access-key", "producer1", "--secret-key", "producer1-secret")
    _sign_admin_calls(args)
    with pytest.raises(CliError) as refused:
        _fetch(args)
    assert "PERMISSION_DENIED" in str(refused.value) and "FORBIDDEN" in str(refused.value)


def test_half_credentials_are_an_input_error(tmp_path, monkeypatch):
    monkeypatch.delenv("RELAYMQ_SECRET_KEY", raising=False)
    args = build_parser().parse_args(["offset-diff", "--replica", "broker-a@127.0.0.1:1", "--access-key", "admin"])
    with pytest.raises(CliError) as refused:
        _sign_admin_calls(args)
    assert refused.value.code == 1 and "--secret-key" in str(refused.value)
