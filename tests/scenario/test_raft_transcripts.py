"""Transcript tests: scripted elections and log repairs, compared with recorded output.

Each tests/testdata/raft/*.txt is a list of blocks: a command line, `----`, the
output it produced, and a blank line. The test replays the commands on a fresh
RaftNetwork and compares the whole rendered file. REWRITE=1 records new output.

Commands: nodes N [key=value...] | campaign ID | tick ID|all [xN] | deliver |
stabilize | run N (tick all, stabilize; N times) | drop A->B | cut A B | isolate ID | heal | propose ID DATA | status |
log ID | crash ID | restart ID | compact ID
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ha.raft.errors import RaftError
from ha.raft.types import Entry, Message, MessageKind
from tests.support.raft_network import NetworkOptions, RaftNetwork

DATA = Path(__file__).resolve().parent.parent / "testdata" / "raft"
_OPTION_NAMES = {"prevote": "pre_vote", "checkquorum": "check_quorum",
                 "jitter": "election_jitter_ticks", "leak": "max_heartbeat_leak",
                 "heartbeat": "heartbeat_ticks", "maxentries": "max_entries_per_message",
                 "maxuncommitted": "max_uncommitted_entries"}


def _entry(entry: Entry) -> str:
    return f"{entry.term}/{entry.index}:{entry.data.decode(errors='replace')!r}"


def format_message(m: Message) -> str:
    head = f"{m.src}->{m.dst} {m.kind.name} term={m.term}"
    kind = m.kind
    if kind is MessageKind.APPEND:
        entries = " ".join(_entry(e) for e in m.entries)
        return f"{head} prev={m.log_term}/{m.index} commit={m.commit} [{entries}]"
    if kind is MessageKind.APPEND_RESPONSE:
        if m.reject:
            return f"{head} reject index={m.index} hint={m.hint_term}/{m.hint}"
        return f"{head} index={m.index}"
    if kind is MessageKind.HEARTBEAT:
        return f"{head} commit={m.commit}"
    if kind in (MessageKind.VOTE, MessageKind.PRE_VOTE):
        return f"{head} last={m.log_term}/{m.index}"
    if kind in (MessageKind.VOTE_RESPONSE, MessageKind.PRE_VOTE_RESPONSE):
        return f"{head} " + (m.reject_reason.name if m.reject and m.reject_reason else "granted")
    if kind is MessageKind.SNAPSHOT and m.snapshot is not None:
        return f"{head} snapshot={m.snapshot.term}/{m.snapshot.index}"
    return head


class Transcript:
    def __init__(self) -> None:
        self.net: RaftNetwork | None = None

    def run(self, command: str) -> list[str]:
        words = command.split()
        if words[0] == "nodes":
            return self._nodes(int(words[1]), words[2:])
        net = self.net
        assert net is not None, "the first command must be `nodes N`"
        handler = getattr(self, "_" + words[0], None)
        assert handler is not None, f"unknown command {words[0]}"
        return handler(net, words[1:])

    def _nodes(self, count: int, options: list[str]) -> list[str]:
        values = {}
        for option in options:
            key, value = option.split("=")
            values[_OPTION_NAMES[key]] = value.lower() == "true" if value.lower() in (
                "true", "false") else int(value)
        self.net = RaftNetwork(tuple(range(1, count + 1)), seed=0, options=NetworkOptions(**values))
        return self._status(self.net, [])

    def _campaign(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.node(int(args[0])).campaign()
        return []

    def _tick(self, net: RaftNetwork, args: list[str]) -> list[str]:
        times = int(args[1][1:]) if len(args) > 1 else 1
        if args[0] == "all":
            net.tick_all(times)
        else:
            net.tick(int(args[0]), times)
        return []

    def _deliver(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.process_all()
        return [format_message(m) for m in net.deliver()] or ["(nothing)"]

    def _stabilize(self, net: RaftNetwork, args: list[str]) -> list[str]:
        return [format_message(m) for m in net.stabilize()] or ["(nothing)"]

    def _run(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.run(int(args[0]))
        return []

    def _drop(self, net: RaftNetwork, args: list[str]) -> list[str]:
        src, dst = args[0].split("->")
        net.drop(int(src), int(dst))
        return []

    def _cut(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.cut(int(args[0]), int(args[1]))
        return []

    def _isolate(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.isolate(int(args[0]))
        return []

    def _heal(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.heal()
        return []

    def _propose(self, net: RaftNetwork, args: list[str]) -> list[str]:
        try:
            return [f"index {net.node(int(args[0])).propose(args[1].encode())}"]
        except RaftError as error:
            return [f"{type(error).__name__}: {error}"]

    def _status(self, net: RaftNetwork, args: list[str]) -> list[str]:
        lines = []
        for node_id in net.ids:
            if net.nodes[node_id] is None:
                lines.append(f"{node_id}: DOWN")
                continue
            n = net.node(node_id)
            lines.append(f"{node_id}: {n.role.name} term={n.term} vote={n.vote} lead={n.leader_id}"
                         f" last={n.last_term}/{n.last_index} commit={n.commit_index}"
                         f" applied={n.applied_index}")
        return lines

    def _log(self, net: RaftNetwork, args: list[str]) -> list[str]:
        node = net.node(int(args[0]))
        entries = node.entries(1, node.last_index)
        head = f"snapshot={node.snapshot_index}"
        return [head] + [_entry(e) for e in entries]

    def _crash(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.crash(int(args[0]))
        return []

    def _restart(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.restart(int(args[0]))
        return self._status(net, [])[int(args[0]) - 1:int(args[0])]

    def _compact(self, net: RaftNetwork, args: list[str]) -> list[str]:
        net.compact(int(args[0]))
        return [f"snapshot={net.node(int(args[0])).snapshot_index}"]


def _commands(text: str) -> list[str]:
    commands, expect_command = [], True
    for line in text.splitlines():
        if expect_command and line.strip() and not line.startswith("#"):
            commands.append(line.strip())
            expect_command = False
        elif not line.strip():
            expect_command = True
    return commands


def render(text: str) -> str:
    transcript, blocks = Transcript(), []
    comments: list[str] = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#"):
            comments.append(line)
    header = "\n".join(comments) + "\n\n" if comments else ""
    for command in _commands(text):
        output = transcript.run(command)
        blocks.append("\n".join([command, "----", *output]))
    return header + "\n\n".join(blocks) + "\n"


FILES = sorted(DATA.glob("*.txt"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_transcript(path: Path) -> None:
    text = path.read_text()
    rendered = render(text)
    if os.environ.get("REWRITE") == "1":
        path.write_text(rendered)
        return
    assert rendered == text, f"{path.name} changed; rerun with REWRITE=1 and review the diff"


def test_there_are_transcripts() -> None:
    assert len(FILES) >= 4
