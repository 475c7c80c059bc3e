"""Authorization keys: what starts, what is refused at start with one line naming the key, exit 2."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from container.cli_container import build_container
from container.config import load_container_config
from container.security import load_accounts, load_acl_store
from metadata.config import ConfigError
from services.access.acl_store import AclStore
from services.messaging.config import MessagingConfig

ROOT = Path(__file__).resolve().parents[2]
ACL = '[[users]]\nusername = "admin"\npassword = "admin-secret"\nuserType = "Super"\n'


def config(**changes) -> MessagingConfig:
    return dataclasses.replace(MessagingConfig(), **changes)


def refused(call, *args) -> str:
    with pytest.raises(ConfigError) as caught:
        call(*args)
    return str(caught.value)


@pytest.fixture
def where(tmp_path) -> str:
    (tmp_path / "acl.toml").write_text(ACL)
    return str(tmp_path / "container.toml")


def test_authorization_without_authentication_is_refused(where):
    message = refused(load_acl_store, config(authorization_enabled=True, authorization_metadata_file="acl.toml"), where)
    assert "authorizationEnabled" in message and "authenticationEnabled" in message and "#11178" in message


def test_authorization_needs_its_file_and_the_file_gives_the_accounts(where):
    message = refused(load_acl_store, config(authentication_enabled=True, authorization_enabled=True), where)
    assert "authorizationMetadataFile: is required" in message
    on = config(authentication_enabled=True, authorization_enabled=True, authorization_metadata_file="acl.toml")
    store = load_acl_store(on, where)
    assert isinstance(store, AclStore) and store.secret_key("admin") == "admin-secret"
    assert load_accounts(on, where) is None  # the store's users are the accounts
    both = dataclasses.replace(on, authentication_accounts_file="accounts.toml")
    assert "authenticationAccountsFile: give either it or authorizationMetadataFile" in refused(load_acl_store, both, where)


def test_only_the_default_providers_are_accepted(where):
    on = config(authentication_enabled=True, authorization_enabled=True, authorization_metadata_file="acl.toml")
    assert load_acl_store(dataclasses.replace(on, authorization_provider=""), where) is not None
    message = refused(load_acl_store, dataclasses.replace(on, authorization_provider="com.example.MyProvider"), where)
    assert "authorizationProvider" in message and "DefaultAuthorizationProvider" in message
    message = refused(load_acl_store, dataclasses.replace(on, authentication_provider="com.example.Ldap"), where)
    assert "authenticationProvider" in message


def test_a_bad_acl_file_at_start_names_its_line(tmp_path, where):
    (tmp_path / "acl.toml").write_text(ACL + 'userStatus = "sleeping"\n')
    on = config(authentication_enabled=True, authorization_enabled=True, authorization_metadata_file="acl.toml")
    assert "acl.toml line 5: users[1].userStatus" in refused(load_acl_store, on, where)
    message = refused(load_acl_store, dataclasses.replace(on, authorization_metadata_file="missing.toml"), where)
    assert "authorizationMetadataFile" in message and "file not found" in message


@pytest.mark.parametrize("value", [True, "true"])
def test_acl_enable_true_points_at_acl_2(tmp_path, value):
    path = tmp_path / "c.toml"
    quoted = "true" if value is True else '"true"'
    path.write_text(f"aclEnable = {quoted}\n[[broker]]\nbrokerName = \"b\"\n")
    message = refused(load_container_config, path)
    assert "aclEnable" in message and "authorizationEnabled" in message and "migrate-acl" in message
    path.write_text("aclEnable = false\n[[broker]]\nbrokerName = \"b\"\n")
    load_container_config(path)  # false: ignored as before


def test_the_cli_refuses_authorization_without_authentication_with_one_line(tmp_path):
    text = (ROOT / "conf/secure/container.toml").read_text().replace("authenticationEnabled = true",
                                                                     "authenticationEnabled = false")
    (tmp_path / "container.toml").write_text(text)
    (tmp_path / "acl.toml").write_text((ROOT / "conf/secure/acl.toml").read_text())
    result = subprocess.run([sys.executable, "-m", "container", "container", "-c", str(tmp_path / "container.toml")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "authorizationEnabled: needs authenticationEnabled = true" in result.stderr.strip().splitlines()[-1]


def test_the_secure_conf_builds_a_container_enforcing_its_acl_file():
    container = build_container(str(ROOT / "conf/secure/container.toml"), None)
    assert container.access is not None and container.accounts is container.acl_store
    state = container.acl_store.state
    assert sorted(state.users) == ["admin", "consumer1", "producer1"] and state.users["admin"].user_type.value == "Super"
    assert container.ports == {} and [s.broker.broker_name for s in container.specs] == ["broker-a"]


def test_inner_credentials_are_rocketmqs_json(where):
    from container.security import load_inner_credentials

    assert load_inner_credentials(config(), where) is None
    given = config(inner_client_authentication_credentials='{"accessKey": "sync", "secretKey": "sync-secret"}')
    credentials = load_inner_credentials(given, where)
    assert (credentials.access_key, credentials.secret_key) == ("sync", "sync-secret")
    assert dict(credentials.metadata())["authorization"].startswith("MQv2-HMAC-SHA1 Credential=sync,")
    for bad in ("sync:secret", '{"accessKey": "sync"}', '{"accessKey": "", "secretKey": "x"}'):
        message = refused(load_inner_credentials, config(inner_client_authentication_credentials=bad), where)
        assert "innerClientAuthenticationCredentials" in message


def test_every_admin_method_has_an_authorization_rule_and_a_name_extractor_where_it_names_topics():
    from metadata.rpc_permissions import ADMIN_RULES, Target
    from proto import acl_admin_pb2, admin_pb2
    from services.access.admin_gate import NAMES

    for module in (admin_pb2, acl_admin_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert method.name in ADMIN_RULES, f"{service.name}.{method.name} has no rule in rpc_permissions"
                targets = set(ADMIN_RULES[method.name].targets) - {Target.CLUSTER}
                assert not targets or method.name in NAMES, f"{method.name} names topics or groups: extract them"
