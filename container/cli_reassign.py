"""``relaymq admin reassign-broker``: move a broker to another container (issue 26, docs/reassign.md).

Kafka's ``kafka-reassign-partitions`` is the model:

* ``--broker NAME --to HOST:PORT`` prints the plan (source, target, the ownership epoch, the
  steps) and the rollback command, and changes nothing; with ``--execute`` the controller
  commits the move and the command follows it step by step until it ends: exit 0 once the
  broker serves on the target, 1 when it rolled back, was cancelled, or did not end within
  ``--wait-ms`` (it goes on; ``--verify`` follows it).
* ``--verify --broker NAME``: the broker's move in progress or its last one, and which live
  containers report serving it (exactly one, the move's: exit 0).
* ``--list``: moves in progress and the last finished ones, and the containers the
  controller knows (live or not).
* ``--cancel --broker NAME``: taken while the source has not been asked to hand over yet.
* ``--json``: one JSON document.  The controller asked is ``--controller``, else the
  nameserver (the reassign deployment embeds the controller in it).  A controller that does
  not answer is named; never a traceback.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from container.cli import CliError
from container.cli_admin import _add, _emit, broker_option, host_port, host_ports, in_range, table


def _client(args: Any):
    from services.controller.client import ControllerClient

    addresses = list(args.controller or args.namesrv)
    timeout_s = args.timeout_ms / 1000
    return ControllerClient(addresses, call_timeout_s=timeout_s, attempts=2 * len(addresses), deadline_s=timeout_s)


async def _ask(client, method: str, request) -> Any:
    from proto import controller_pb2 as pb
    from services.controller.client import ControllerClientError

    try:
        reply = await client.call(method, request)
    except ControllerClientError as exc:
        raise CliError(f"no controller answers at {';'.join(client.addresses)}: {exc}", 1) from None
    if reply.status.code != pb.ControllerStatus.SUCCESS:
        raise CliError(f"the controller refused {method}: {pb.ControllerStatus.Code.Name(reply.status.code)} "
                       f"{reply.status.remark}".rstrip(), 1)
    return reply


def _plan_text(move: dict, executing: bool) -> str:
    broker, source, target, epoch = move["broker"], move["source"], move["target"], move["epoch"]
    lines = [f"Move {broker} from {source} to {target} at ownership epoch {epoch} (its store stays where it is, "
             "on shared storage: no message is copied)",
             f"  1. {source} releases {broker}: takes no new write, finishes the ones in flight, flushes and "
             "closes the store",
             f"  2. {target} takes the store over at epoch {epoch} (from then on {source} can acknowledge nothing) "
             "and opens it",
             f"  3. {target} serves {broker}; routes name it, and {source} relays the calls that still reach it",
             f"Rollback: relaymq admin reassign-broker --broker {broker} --to {source} --execute"]
    if not executing:
        lines.append("Dry run: nothing changed.  Add --execute to move.")
    return "\n".join(lines)


async def _moves(client) -> tuple[dict, list[dict]]:
    from proto import controller_pb2 as pb

    reply = await _ask(client, "ListMoves", pb.ListMovesRequest())
    return json.loads(reply.moves_json or "{}"), json.loads(reply.containers_json or "[]")


def _find(moves: dict, broker: str, epoch: int | None = None) -> tuple[dict | None, bool]:
    """(the broker's move of ``epoch`` or its newest, whether it is in progress)."""
    for move in moves.get("active", []):
        if move["broker"] == broker and epoch in (None, move["epoch"]):
            return move, True
    finished = [m for m in moves.get("finished", []) if m["broker"] == broker and epoch in (None, m["epoch"])]
    return (finished[-1] if finished else None), False


def _serving(move: dict) -> str:
    return move["target"] if move["step"] in ("OPENED", "DONE") else move["source"]


async def _execute(args: Any, client, planned: dict) -> tuple[dict, int]:
    from proto import controller_pb2 as pb

    reply = await _ask(client, "MoveBroker", pb.MoveBrokerRequest(broker_name=args.broker, to=args.to, execute=True))
    if reply.refused:
        raise CliError(f"cannot move {args.broker}: {reply.refused}", 1)
    move = json.loads(reply.move_json)
    began, steps, last = time.monotonic(), [], None
    deadline = began + args.wait_ms / 1000
    while True:
        try:
            moves, _ = await _moves(client)
        except CliError as exc:  # a controller leader change: the next leader resumes the move
            if not args.json:
                print(f"  +{time.monotonic() - began:6.3f} s  (controller not answering: {exc}; asking again)", flush=True)
            moves = None
        found, active = _find(moves, args.broker, move["epoch"]) if moves is not None else (None, True)
        if found is not None and found["step"] != last:
            last = found["step"]
            steps.append({"step": last, "atS": round(time.monotonic() - began, 3), "why": found.get("why", "")})
            if not args.json:
                why = f" ({found['why']})" if found.get("why") else ""
                print(f"  +{steps[-1]['atS']:6.3f} s  {last}{' (fenced: the source never released)' if found.get('fenced') and last == 'OPENING' else ''}{why}",
                      flush=True)
        if found is not None and not active:
            code = 0 if found["step"] == "DONE" else 1
            return {"move": found, "steps": steps, "serving": _serving(found), "ended": True}, code
        if time.monotonic() >= deadline:
            return {"move": found or move, "steps": steps, "serving": None, "ended": False}, 1
        await asyncio.sleep(0.05)


def reassign_broker(args: Any) -> int:
    from proto import controller_pb2 as pb

    modes = [m for m in ("execute", "verify", "list", "cancel") if getattr(args, m)]
    if len(modes) > 1:
        raise CliError(f"give at most one of --execute, --verify, --list, --cancel (got {', '.join(modes)})", 2)
    mode = modes[0] if modes else "plan"
    if mode != "list" and not args.broker:
        raise CliError(f"--broker is required{'' if mode == 'plan' else ' with --' + mode}", 2)
    if mode in ("plan", "execute") and not args.to:
        raise CliError("--to HOST:PORT is required: the target container's client endpoint, as cluster-list shows it", 2)

    async def run() -> tuple[dict, int, Any]:
        client = _client(args)
        try:
            if mode == "list":
                moves, containers = await _moves(client)
                return {"moves": moves, "containers": containers}, 0, _list_text
            if mode == "verify":
                moves, containers = await _moves(client)
                return _verify(args.broker, moves, containers)
            if mode == "cancel":
                reply = await _ask(client, "CancelMove", pb.CancelMoveRequest(broker_name=args.broker))
                if reply.refused:
                    raise CliError(f"cannot cancel: {reply.refused}", 1)
                move = json.loads(reply.move_json)
                return {"move": move, "serving": move["source"]}, 0, lambda d: (
                    f"cancelled the move of {d['move']['broker']}: it stays on {d['serving']}")
            reply = await _ask(client, "MoveBroker", pb.MoveBrokerRequest(broker_name=args.broker, to=args.to))
            if reply.refused:
                raise CliError(f"cannot move {args.broker}: {reply.refused}", 1)
            planned = json.loads(reply.move_json)
            if mode == "plan":
                return {"plan": planned, "executed": False}, 0, lambda d: _plan_text(d["plan"], False)
            if not args.json:
                print(_plan_text(planned, True), flush=True)
            document, code = await _execute(args, client, planned)
            return document, code, _outcome_text
        finally:
            await client.close()

    try:
        document, code, render = asyncio.run(run())
    except KeyboardInterrupt:
        raise CliError("interrupted; the move goes on: follow it with --verify", 130) from None
    return _emit(args, document, render, code)


def _outcome_text(document: dict) -> str:
    move = document["move"]
    if not document["ended"]:
        return (f"the move of {move['broker']} has not ended yet ({move['step']}); it goes on: "
                f"relaymq admin reassign-broker --verify --broker {move['broker']}")
    took = (move["sinceMs"] - move["startedMs"]) / 1000
    if move["step"] == "DONE":
        return (f"{move['broker']} serves on {move['target']} (moved in {took:.3f} s"
                f"{', fenced: ' + move['why'] if move.get('fenced') else ''})")
    return f"the move of {move['broker']} ended {move['step']} after {took:.3f} s: {move.get('why') or 'cancelled'}; " \
           f"{move['broker']} serves on {move['source']}"


def _verify(broker: str, moves: dict, containers: list[dict]) -> tuple[dict, int, Any]:
    move, active = _find(moves, broker)
    live = [c["endpoint"] for c in containers if c["live"] and broker in c["brokers"]]
    expected = _serving(move) if move is not None else None
    ok = not active and len(live) == 1 and (expected is None or live == [expected])
    document = {"broker": broker, "move": move, "inProgress": active, "servedBy": live, "ok": ok}

    def render(d: dict) -> str:
        m = d["move"]
        head = (f"{broker}: no move recorded" if m is None else
                f"{broker}: move to {m['target']} at epoch {m['epoch']} {'in progress: ' if d['inProgress'] else ''}"
                f"{m['step']}{' (' + m['why'] + ')' if m.get('why') else ''}")
        served = ", ".join(d["servedBy"]) or "no live container"
        return f"{head}\nserved by: {served}" + ("" if d["ok"] else "  (expected exactly one: "
                                                   f"{expected or 'any'})")
    return document, 0 if ok else 1, render


def _list_text(document: dict) -> str:
    moves, containers = document["moves"], document["containers"]
    rows = [[m["broker"], m["source"], m["target"], m["epoch"], m["step"], "yes" if m.get("fenced") else "",
             f"{(m['sinceMs'] - m['startedMs']) / 1000:.3f}", m.get("why", "")]
            for m in [*moves.get("active", []), *reversed(moves.get("finished", []))]]
    parts = [table(["BROKER", "FROM", "TO", "EPOCH", "STEP", "FENCED", "SECONDS", "WHY"], rows) if rows else "no moves"]
    parts.append(table(["CONTAINER", "INTERNAL", "LIVE", "BROKERS"],
                       [[c["endpoint"], c["admin"], "yes" if c["live"] else f"no ({c['ageMs'] / 1000:.0f} s)",
                         ", ".join(c["brokers"]) or "-"] for c in containers]) if containers else
                 "no container has reported to the controller (containers need controllerAddr)")
    return "\n\n".join(parts)


def register(subparsers: Any, admin_subparsers: Any) -> None:
    p = _add(admin_subparsers, "reassign-broker", reassign_broker,
             "move a broker on shared storage to another container, without copying (plan; --execute to move)",
             hidden_aliases=("reassignBroker",))
    broker_option(p, help_text="the broker to move")
    p.add_argument("--to", type=host_port, default=None, metavar="HOST:PORT",
                   help="the target container's client endpoint, as cluster-list shows it")
    p.add_argument("--execute", action="store_true", help="move (without it: print the plan, change nothing)")
    p.add_argument("--verify", action="store_true", help="the broker's move and who serves it; exit 0 when settled")
    p.add_argument("--list", action="store_true", help="moves in progress and finished, and the containers")
    p.add_argument("--cancel", action="store_true", help="cancel the broker's move (before its source hands over)")
    p.add_argument("--wait-ms", type=in_range(1, 3_600_000), default=60_000,
                   help="how long --execute follows the move (default 60000); it goes on after")
    p.add_argument("--controller", type=host_ports, default=None, metavar="HOST:PORT[;HOST:PORT...]",
                   help="controller member(s) (default: the nameserver, which embeds it in conf/reassign)")
