"""A leader's heartbeats may leave while a Ready is persisted: only those, and never ahead of the disk."""
from __future__ import annotations

import random

from ha.raft.node import RaftNode
from ha.raft.types import Message, MessageKind, RaftConfig


def _leader() -> RaftNode:
    node = RaftNode(RaftConfig(node_id=1, peers=(1, 2, 3), heartbeat_ticks=1, pre_vote=False), random.Random(3))
    node.campaign()
    _round(node)
    node.step(Message(MessageKind.VOTE_RESPONSE, 2, 1, node.term))
    _round(node)
    node.step(Message(MessageKind.APPEND_RESPONSE, 2, 1, node.term, index=node.last_index))
    _round(node)  # the no-op is committed, persisted and advanced
    return node


def _round(node: RaftNode):
    ready = node.ready()
    node.advance(ready)
    return ready


def test_heartbeats_leave_early_with_the_durable_commit_and_nothing_else_does():
    node = _leader()
    durable_commit = node.commit_index
    node.propose(b"x")
    in_flight = node.ready()  # being persisted: holds the new entry
    node.step(Message(MessageKind.APPEND_RESPONSE, 2, 1, node.term, index=node.last_index))  # quorum: commit moves
    assert node.commit_index > durable_commit
    node.tick()  # heartbeat interval: heartbeats queued
    early = node.heartbeats_before_persist()
    assert {m.dst for m in early} == {2, 3} and {m.kind for m in early} == {MessageKind.HEARTBEAT}
    assert all(m.commit <= durable_commit for m in early), "a heartbeat revealed a commit the disk has not got"
    node.advance(in_flight)
    rest = node.ready().messages
    assert not any(m.kind is MessageKind.HEARTBEAT for m in rest)  # taken once, not sent twice
    assert any(m.kind is MessageKind.APPEND for m in rest)  # the commit travels with the next Ready


def test_a_leader_whose_term_is_not_durable_yet_sends_nothing_early():
    node = RaftNode(RaftConfig(node_id=1, peers=(1,), heartbeat_ticks=1, pre_vote=False), random.Random(3))
    node.campaign()  # a single member: leader at once, the new term only in the Ready not yet persisted
    node.ready()
    node.tick()
    assert node.heartbeats_before_persist() == ()


def test_followers_send_nothing_early():
    node = RaftNode(RaftConfig(node_id=2, peers=(1, 2, 3)), random.Random(3))
    node.step(Message(MessageKind.HEARTBEAT, 1, 2, 1))
    assert node.heartbeats_before_persist() == ()
