"""The CLI's edge: names, flags, aliases, help and version, checked without any server."""
from __future__ import annotations

import argparse
import datetime

import pytest

from container.cli import build_parser, main
from container.cli_admin import cluster_name, host_port, host_ports, in_range, topic_name
from container.cli_ops import timestamp_ms


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def refused(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_no_arguments_print_help_and_exit_zero(capsys):
    assert main([]) == 0
    assert "usage: relaymq" in capsys.readouterr().out
    assert main(["admin"]) == 0
    assert "topic-list" in capsys.readouterr().out


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("relaymq ")


def test_old_and_mqadmin_names_reach_the_same_command():
    handlers = {parse("admin", name, "-c", "C").handler for name in ("topic-list", "list-topic", "topicList")}
    assert len(handlers) == 1
    assert parse("admin", "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now").handler is \
        parse("admin", "reset-offset-by-time", "-g", "G", "-t", "T", "-s", "now").handler


def test_hidden_aliases_are_not_in_help(capsys):
    assert main(["admin"]) == 0
    out = capsys.readouterr().out
    assert "topic-list (list-topic)" in out and "topicList)" not in out.replace("(mqadmin topicList)", "")
    with pytest.raises(SystemExit):
        main(["admin", "elect-master", "--help"])
    help_text = capsys.readouterr().out
    assert "--broker BROKER" in help_text and "--broker-name" not in help_text and "-bn" not in help_text


def test_broker_flag_is_the_broker_name_everywhere_old_spellings_still_parse():
    assert parse("admin", "get-sync-state-set", "-a", "h:1", "--broker", "broker-a").broker == ["broker-a"]
    assert parse("admin", "get-sync-state-set", "-a", "h:1", "--broker-name", "broker-a").broker == ["broker-a"]
    old = parse("admin", "elect-master", "-a", "h:1", "-bn", "broker-a", "-b", "2")
    assert (old.broker, old.broker_id) == ("broker-a", 2)
    assert parse("admin", "topic-status", "-t", "T").handler
    assert parse("admin", "broker-status", "--broker-name", "broker-a").broker == "broker-a"


def test_cluster_flag_refuses_a_config_file(capsys):
    err = refused(capsys, "admin", "topic-list", "-c", "conf/quickstart.toml")
    assert "looks like a file: in admin commands -c is --cluster" in err


@pytest.mark.parametrize("argv, message", [
    (("admin", "update-topic", "-t", "bad name"), "'bad name' is not a topic name"),
    (("admin", "update-topic", "-t", "T", "--queues", "0"), "0 must be between 1 and 1024"),
    (("admin", "update-group", "-g", "G", "--max-attempts", "66"), "66 must be between 1 and 65"),
    (("admin", "consumer-progress", "-g", "x" * 256), "is not a group name"),
    (("admin", "cluster-list", "-n", "nohost"), "'nohost' is not HOST:PORT"),
    (("admin", "cluster-list", "--timeout-ms", "0"), "0 must be between 1 and 600000"),
    (("admin", "reset-offset-by-time", "-g", "G", "-t", "T", "-s", "yesterday"), "'yesterday' is not a time"),
    (("admin", "query-msg-by-key", "-t", "T", "-k", "two words"), "without spaces"),
    (("admin", "query-msg-by-id", "-t", "T", "-i", "X", "--max-scan", "0"), "0 must be between 1 and 1000000"),
    (("admin", "query-msg-by-id", "-t", "T", "-i", "X", "--body-bytes", "70000"), "must be between 0 and 65536"),
    (("admin", "update-broker-config", "-b", "broker-a", "-k", "no such", "-v", "1"), "is not a configuration key"),
    (("admin", "get-broker-config", "-b", "broker-a", "--broker-id", "-1"), "must not be negative"),
    (("admin", "broker-status", "--container", "h:99999"), "is not HOST:PORT"),
    (("admin", "elect-master", "-a", "h:1", "--broker", "b", "--broker-id", "0"), "0 must be between 1 and"),
    (("admin", "clean-broker-metadata", "-a", "h:1", "--broker", "b", "--broker-ids", "1;x"), "is not broker ids"),
    (("admin", "producer-connection"), "the following arguments are required: -t/--topic"),
])
def test_every_flag_rejects_bad_input_with_a_clear_message(capsys, argv, message):
    assert message in refused(capsys, *argv)


def test_argument_types():
    assert topic_name("Orders_1") == "Orders_1"
    assert host_ports("a:1;b:2, c:3") == ["a:1", "b:2", "c:3"]
    assert host_port("[::1]:9876") == "[::1]:9876"
    assert in_range(1, 5)("5") == 5
    with pytest.raises(argparse.ArgumentTypeError):
        cluster_name("dir/cluster")


def test_timestamps():
    assert timestamp_ms("1700000000000") == 1_700_000_000_000
    assert timestamp_ms("now", now_ms=42) == 42
    local = datetime.datetime(2024, 5, 1, 12, 0, 0).timestamp() * 1000
    assert timestamp_ms("2024-05-01T12:00:00") == int(local)
    assert timestamp_ms("2024-05-01#12:00:00:000") == int(local)
    assert timestamp_ms("2024-05-01T12:00:00+00:00") == 1_714_564_800_000


def test_broker_member_group_needs_a_valid_broker_name(capsys):
    assert "--broker" in refused(capsys, "admin", "broker-member-group")
    assert "bad name!" in refused(capsys, "admin", "broker-member-group", "--broker", "bad name!")
    assert "bad cluster" in refused(capsys, "admin", "broker-member-group", "-b", "broker-a", "-c", "bad cluster")
    args = parse("admin", "getBrokerMemberGroup", "-b", "broker-a", "--json")
    assert (args.broker, args.cluster, args.json) == ("broker-a", None, True)


def test_broker_member_group_of_an_unreachable_nameserver_is_one_line(capsys):
    code = main(["admin", "broker-member-group", "-b", "broker-a", "-n", "127.0.0.1:1", "--timeout-ms", "500"])
    assert code == 1 and "cannot reach" in capsys.readouterr().err
