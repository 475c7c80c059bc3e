"""``relaymq admin migrate-acl`` prints a 4.x plain_acl.yml as an ACL file; credentials come in pairs."""
from __future__ import annotations

from container.cli import main
from metadata.acl_files import parse_acl_toml

PLAIN = """
globalWhiteRemoteAddresses: ['10.10.103.*']
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
"""


def test_migrate_acl_prints_an_acl_file_and_its_warnings(tmp_path, capsys):
    (tmp_path / "plain_acl.yml").write_text(PLAIN)
    assert main(["admin", "migrate-acl", "--file", str(tmp_path / "plain_acl.yml")]) == 0
    out, err = capsys.readouterr()
    state = parse_acl_toml(out)
    assert sorted(state.users) == ["RocketMQ", "rocketmq2"] and state.users["rocketmq2"].user_type.value == "Super"
    assert {e.resource.key for p in state.acls["RocketMQ"].policies for e in p.entries} == \
        {"Topic:topicA", "Topic:topicB", "Group:groupA", "Topic:*", "Group:*"}
    assert "warning: globalWhiteRemoteAddresses" in err and "whiteRemoteAddress" in err


def test_migrate_acl_names_an_unreadable_file(tmp_path, capsys):
    (tmp_path / "bad.yml").write_text("accounts: [\n")
    assert main(["admin", "migrate-acl", "--file", str(tmp_path / "bad.yml")]) == 2
    assert "bad.yml line" in capsys.readouterr().err
    assert main(["admin", "migrate-acl", "--file", str(tmp_path / "none.yml")]) == 2


def test_admin_credentials_come_in_pairs(capsys, monkeypatch):
    monkeypatch.delenv("RELAYMQ_ACCESS_KEY", raising=False)
    monkeypatch.setenv("RELAYMQ_SECRET_KEY", "s")
    assert main(["admin", "list-acl"]) == 2
    assert "--access-key (or RELAYMQ_ACCESS_KEY) is missing" in capsys.readouterr().err
