"""Internal ports beyond loopback need the cluster secret: refused at start with one line naming
the key and exit 2 (no traceback), unless allowUnauthenticatedInternalPorts says so."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from container.cli import main
from container.cli_container import _load_namesrv_config, build_container
from container.cli_controller import build_config
from metadata.config import ConfigError
from services import cluster_auth

ROOT = Path(__file__).resolve().parents[2]
SECRET_TEXT = "a-cluster-secret-of-enough-bytes\n"
BROKER = '[[broker]]\nbrokerClusterName = "DefaultCluster"\nbrokerName = "broker-a"\nbrokerId = 0\n'


@pytest.fixture(autouse=True)
def no_credential_left():
    yield
    cluster_auth.install(None)


def container_file(tmp_path: Path, **top) -> str:
    lines = [f"storePathRootDir = {str(tmp_path / 'data')!r}".replace("'", '"'), "metricsPromExporterPort = 0"]
    lines += [f"{key} = {value}" for key, value in top.items()]
    path = tmp_path / "container.toml"
    path.write_text("\n".join(lines) + "\n" + BROKER)
    return str(path)


def refused(call, *args) -> str:
    with pytest.raises(ConfigError) as caught:
        call(*args)
    return str(caught.value)


@pytest.mark.parametrize("top, key", [
    ({"adminBindAddress": '"0.0.0.0"'}, "adminBindAddress"),
    ({"adminBindAddress": '"10.1.2.3"'}, "adminBindAddress"),
    ({"adminBindAddress": '""'}, "adminBindAddress"),
    ({"bindAddress": '"0.0.0.0"'}, "bindAddress"),           # the embedded nameserver's
    ({"enableControllerInNamesrv": "true", "controllerDLegerPeers": '"n0-10.0.0.7:9878"'}, "controllerDLegerPeers"),
])
def test_a_container_with_an_internal_port_beyond_loopback_and_no_secret_is_refused(tmp_path, top, key):
    message = refused(build_container, container_file(tmp_path, **top), None)
    assert message.split(": ", 1)[1].startswith(f"{key}: binds ") and " without internal authentication" in message
    assert "clusterAuthenticationSecretFile" in message and "allowUnauthenticatedInternalPorts" in message
    assert cluster_auth.installed() is None


@pytest.mark.parametrize("host", ['"127.0.0.1"', '"127.0.0.2"', '"localhost"', '"::1"'])
def test_loopback_needs_no_secret(tmp_path, host):
    build_container(container_file(tmp_path, adminBindAddress=host), None)
    assert cluster_auth.installed() is None


def test_the_explicit_key_or_a_secret_lets_it_start(tmp_path):
    build_container(container_file(tmp_path, adminBindAddress='"0.0.0.0"', allowUnauthenticatedInternalPorts="true"),
                    None)
    assert cluster_auth.installed() is None
    (tmp_path / "cluster.secret").write_text(SECRET_TEXT)
    build_container(container_file(tmp_path, adminBindAddress='"0.0.0.0"',
                                   clusterAuthenticationSecretFile='"cluster.secret"'), None)
    assert cluster_auth.installed().secret.key == SECRET_TEXT.strip().encode()


@pytest.mark.parametrize("text, expected", [(None, "cannot read"), ("too-short", "at least 16 bytes")])
def test_an_unreadable_or_short_secret_file_is_refused(tmp_path, text, expected):
    if text is not None:
        (tmp_path / "cluster.secret").write_text(text)
    message = refused(build_container, container_file(tmp_path, clusterAuthenticationSecretFile='"cluster.secret"'), None)
    assert message.startswith(f"{tmp_path / 'container.toml'}: clusterAuthenticationSecretFile:") and expected in message


def test_a_standalone_nameserver_and_controller_are_held_to_the_same_rule(tmp_path):
    path = tmp_path / "namesrv.properties"
    path.write_text("listenPort=0\nbindAddress=0.0.0.0\n")
    assert "bindAddress: binds the nameserver's port (listenPort) to 0.0.0.0" in refused(_load_namesrv_config, str(path))
    path.write_text("listenPort=0\nbindAddress=0.0.0.0\nallowUnauthenticatedInternalPorts=true\n")
    _load_namesrv_config(str(path))
    path.write_text("listenPort=0\nenableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-10.0.0.5:9876\n"
                    "controllerDLegerSelfId=n0\n")
    assert "controllerDLegerPeers: binds the controller's port (its peer address) to 10.0.0.5" in refused(_load_namesrv_config, str(path))
    controller = tmp_path / "n0.properties"
    controller.write_text(f"controllerDLegerPeers=n0-0.0.0.0:9878;n1-10.0.0.6:9878\ncontrollerDLegerSelfId=n0\n"
                          f"controllerStorePath={tmp_path / 'c'}\n")
    assert "controllerDLegerPeers: binds the controller's port (its peer address) to 0.0.0.0" in refused(build_config, str(controller))
    (tmp_path / "cluster.secret").write_text(SECRET_TEXT)
    controller.write_text(controller.read_text() + "clusterAuthenticationSecretFile=cluster.secret\n")
    build_config(str(controller))
    assert cluster_auth.installed() is not None


def test_the_commands_exit_2_with_one_line_and_no_traceback(tmp_path, capsys):
    path = tmp_path / "namesrv.properties"
    path.write_text("listenPort=0\nbindAddress=0.0.0.0\n")
    assert main(["namesrv", "-c", str(path)]) == 2
    assert capsys.readouterr().err.strip().endswith("allowUnauthenticatedInternalPorts = true to accept the risk")
    assert main(["admin", "--cluster-secret-file", str(tmp_path / "missing"), "cluster-list"]) == 2
    assert "clusterAuthenticationSecretFile: cannot read" in capsys.readouterr().err
    result = subprocess.run([sys.executable, "-m", "container", "container", "-c",
                             container_file(tmp_path, adminBindAddress='"0.0.0.0"')],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "adminBindAddress: binds internal ports (listenPort, haListenPort) to 0.0.0.0" in result.stderr.strip().splitlines()[-1]


def test_the_secure_cluster_conf_gives_every_member_the_same_secret():
    directory = ROOT / "conf/secure/cluster"
    _load_namesrv_config(str(directory / "namesrv.toml"))
    secret = cluster_auth.installed().secret
    for name in ("container-1.toml", "container-2.toml"):
        cluster_auth.install(None)
        container = build_container(str(directory / name), None)
        assert cluster_auth.installed().secret == secret
        assert container.access is not None and container.inner_credentials is not None
        assert [s.broker.broker_name for s in container.specs] == ["broker-a"]
