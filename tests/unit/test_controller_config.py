"""ControllerConfig: RocketMQ keys, defaults, and clear errors naming the key."""
from __future__ import annotations

from pathlib import Path

import pytest

from container.cli import main
from metadata.config import ConfigError
from services.controller.config import controller_config, parse_peers

PEERS = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"


def test_defaults_and_peer_ids():
    config = controller_config({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n1"}, "f")
    assert [(p.name, p.node_id, p.port) for p in config.peers] == [("n0", 0, 9878), ("n1", 1, 9868), ("n2", 2, 9858)]
    assert config.self_peer.address == "127.0.0.1:9868"
    assert config.store_path == Path("relaymq-data/controller/n1")
    assert not config.enable_elect_unclean_master and config.heartbeat_timeout_ms == 10_000
    # failover budget: election timeout (heartbeat x leak + jitter) well under 2 s
    assert (config.heartbeat_ticks * config.max_heartbeat_leak + config.election_jitter_ticks) * config.tick_ms <= 1000


@pytest.mark.parametrize("values, key", [
    ({"controllerDLegerSelfId": "n0"}, "controllerDLegerPeers"),
    ({"controllerDLegerPeers": PEERS}, "controllerDLegerSelfId"),
    ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n7"}, "controllerDLegerSelfId"),
    ({"controllerDLegerPeers": "n0-localhost", "controllerDLegerSelfId": "n0"}, "controllerDLegerPeers"),
    ({"controllerDLegerPeers": "n0-a:1;n0-b:2", "controllerDLegerSelfId": "n0"}, "controllerDLegerPeers"),
    ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0", "controllerRaftTickMs": "0"},
     "controllerRaftTickMs"),
    ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0", "enableElectUncleanMaster": "maybe"},
     "enableElectUncleanMaster"),
])
def test_bad_values_name_the_key(values, key):
    with pytest.raises(ConfigError) as caught:
        controller_config(values, "ctl.toml")
    assert caught.value.key == key and caught.value.where == "ctl.toml"


def test_peer_ids_do_not_depend_on_order():
    assert {p.name: p.node_id for p in parse_peers("n2-a:1;n0-b:2;n1-c:3", "x")} == {"n0": 0, "n1": 1, "n2": 2}


def test_cli_reports_config_errors_in_one_line(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(f'controllerDLegerPeers = "{PEERS}"\ncontrollerDLegerSelfId = "n0"\nnoSuchKey = 1\n')
    assert main(["controller", "-c", str(path)]) == 2
    assert "noSuchKey" in capsys.readouterr().err
    assert main(["controller", "-c", str(tmp_path / "missing.toml")]) == 2


def test_admin_rejects_bad_controller_address(capsys):
    with pytest.raises(SystemExit) as exited:  # argparse: checked before anything is sent
        main(["admin", "get-controller-metadata", "--controller", "nonsense"])
    assert exited.value.code == 2
    assert "--controller" in capsys.readouterr().err


def test_shipped_configs_form_the_documented_group():
    root = Path(__file__).resolve().parents[2] / "conf" / "controller"
    from container.config_loader import load_config_file
    ports = []
    for i in range(3):
        config = controller_config(load_config_file(root / f"n{i}.toml"), f"n{i}.toml")
        assert config.self_id == f"n{i}" and config.peers_text == PEERS
        ports.append(config.self_peer.port)
    assert ports == [9878, 9868, 9858]
