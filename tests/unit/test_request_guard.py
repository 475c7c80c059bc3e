"""The pure parts of services/request_guard.py: the log throttle and the names it prints."""
from __future__ import annotations

from services.request_guard import BadRequestLog, describe_failure, peer_host, split_path


def test_one_line_per_peer_per_interval_with_the_count_not_logged():
    throttle = BadRequestLog(interval_ms=1000)
    assert throttle.note("10.0.0.1", 0) == 0
    assert [throttle.note("10.0.0.1", t) for t in (1, 500, 999)] == [None, None, None]
    assert throttle.note("10.0.0.2", 10) == 0  # another peer has its own budget
    assert throttle.note("10.0.0.1", 1000) == 3
    assert throttle.note("10.0.0.1", 1500) is None
    assert throttle.note("10.0.0.1", 5000) == 1


def test_peer_table_is_bounded():
    throttle = BadRequestLog(interval_ms=1000, max_peers=2)
    assert throttle.note("a", 0) == 0 and throttle.note("b", 0) == 0
    assert throttle.note("c", 1) == 0  # shared entry for peers beyond the limit
    assert throttle.note("d", 2) is None
    assert throttle.note("e", 3000) == 0  # a and b are quiet and past their interval: forgotten
    assert len(throttle._peers) <= 2


def test_zero_interval_logs_every_one():
    throttle = BadRequestLog(interval_ms=0)
    assert [throttle.note("p", 5) for _ in range(3)] == [0, 0, 0]


def test_names():
    assert peer_host("ipv4:127.0.0.1:54321") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:80") == "[::1]"
    assert peer_host("unix:/tmp/socket") == "unix:/tmp/socket"
    assert peer_host("") == "unknown peer"
    assert split_path("/apache.rocketmq.v2.MessagingService/SendMessage") == ("apache.rocketmq.v2.MessagingService", "SendMessage")
    text = describe_failure("pkg.Request", ValueError("Error parsing message"))
    assert text == "the request is not a valid pkg.Request: Error parsing message"
    assert len(describe_failure("pkg.Request", ValueError("x" * 5000))) == 300
