"""The container config loader: both formats, and one clear error for every bad input."""
from __future__ import annotations

import pytest

from container.config import ContainerConfig, load_container_config
from container.config_loader import load_config_file, parse_properties
from metadata.config import ConfigError, bind


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_with_inline_brokers(tmp_path):
    path = write(tmp_path, "c.toml", 'grpcServerPort = 18081\n[[broker]]\nbrokerName = "a"\n[[broker]]\nbrokerName = "b"\n')
    config, entries, _ = load_container_config(path)
    assert config.grpc_server_port == 18081
    assert [e.values["brokerName"] for e in entries] == ["a", "b"]


def test_properties_with_broker_config_paths(tmp_path):
    write(tmp_path, "a.properties", "brokerName=a\nbrokerId=0\n")
    write(tmp_path, "b.properties", "brokerName=b\nbrokerRole=SLAVE\nbrokerId=1\n")
    path = write(tmp_path, "c.properties", "listenPort=20911\nbrokerConfigPaths=a.properties:b.properties\n")
    config, entries, _ = load_container_config(path)
    assert config.listen_port == 20911
    assert [e.values["brokerName"] for e in entries] == ["a", "b"]
    assert entries[1].values["brokerRole"] == "SLAVE"


@pytest.mark.parametrize("text, key, reason", [
    ("grpcServerPort = 'x'\n", "grpcServerPort", "not an integer"),
    ("grpcServerPort = 70000\n", "grpcServerPort", "above the maximum"),
    ("noSuchKey = 1\n", "noSuchKey", "unknown key"),
    ("startEmbeddedNamesrv = 'maybe'\n", "startEmbeddedNamesrv", "not a boolean"),
    ("registerNameServerPeriod = 5\n", "registerNameServerPeriod", "below the minimum"),
])
def test_bad_values_name_file_key_and_reason(tmp_path, text, key, reason):
    path = write(tmp_path, "c.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_container_config(path)
    message = str(caught.value)
    assert str(path) in message and key in message and reason in message


@pytest.mark.parametrize("name, content, reason", [
    ("missing.toml", None, "file not found"),
    ("bad.toml", "a = [", "invalid TOML"),
    ("bad.yaml", "a: 1", "unknown config format"),
    ("bin.toml", b"\xff\xfe", "not UTF-8"),
])
def test_unreadable_files(tmp_path, name, content, reason):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=reason):
        load_config_file(path)


def test_properties_parser_comments_continuations_and_errors():
    assert parse_properties("# c\n! c\na=1\nb: 2\nc = x\\\n  y\n", "f") == {"a": "1", "b": "2", "c": "xy"}
    with pytest.raises(ConfigError, match="f:2"):
        parse_properties("a=1\nnot a pair\n", "f")


def test_ignored_rocketmq_keys_are_accepted(tmp_path):
    path = write(tmp_path, "c.properties", "rocketmqHome=/opt/rmq\nlistenPort=1\n")
    config, _, _ = load_container_config(path)
    assert config.listen_port == 1


def test_defaults_are_the_quickstart_ports():
    config = bind(ContainerConfig, {}, "defaults")
    assert (config.grpc_server_port, config.namesrv_listen_port, config.listen_port) == (8081, 9876, 10911)


def test_namesrv_addr_is_a_container_key_not_an_ignored_one(tmp_path):
    path = write(tmp_path, "c.toml", 'namesrvAddr = "127.0.0.1:19876;127.0.0.1:29876"\n')
    config, _, _ = load_container_config(path)
    assert config.namesrv_addresses == ["127.0.0.1:19876", "127.0.0.1:29876"]
