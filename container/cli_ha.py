"""``relaymq admin ha-status``: per broker group, the master and each slave's replication.

Each replica also says whether its special services (timer, transaction check, pop revive)
run (``specialServicesRunning``) and whether it is a slave acting for its absent master
(``acting``; acting master, RIP-32).

Rules: the members come from the nameserver's cluster info; each member's container is
asked for its broker status (``BrokerStatus``), whose ``ha`` part the replication driver
fills.  Lag in bytes is the master's max offset minus the slave's acknowledged offset;
lag in messages is the difference of the sums of every consume queue's max offset.  A
container that does not answer is shown as UNREACHABLE; a group with no registered master
shows its master as NOT_REGISTERED, and a slave its master remembers but the nameserver
does not list is shown as NOT_REGISTERED too; never a traceback.  A master in pre-online (not
registered yet) is found through the address it offered its slaves and shown as
``PRE_ONLINE`` with its ``preOnline`` status: the step it waits on, the member, the attempt.
Under a controller, a replica that is neither registered nor remembered by its master (the
dead old master after an election: the new master never had it as a slave) is listed from
the controller's replicas as NOT_REGISTERED, so every group's table names each replica;
the controller asked is ``--controller``, else the nameserver (conf/controller-mode embeds
it), and one that does not answer adds nothing.
"""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from container.cli import CliError
from container.cli_admin import _add, _admin_call, _emit, _members, _run, broker_option, cluster_option, table
from proto import admin_pb2 as apb
from services.admin.client import AdminError


async def _member_status(member: Any, timeout_ms: int) -> dict | None:
    try:
        reply = await _admin_call(member.address, "BrokerStatus",
                                  apb.AdminBrokerStatusRequest(broker_name=member.broker_name), timeout_ms)
    except AdminError:
        return None
    for broker in reply.brokers:
        if broker.broker_id == member.broker_id:
            status = json.loads(broker.status_json or "{}")
            return {**(status.get("ha") or {}), "specialServicesRunning": bool(status.get("specialServicesRunning")),
                    "acting": bool(status.get("acting")),
                    **({"preOnline": status["preOnline"]} if status.get("preOnline") else {})}
    return None


async def _pre_online_master(group: dict, timeout_ms: int) -> dict | None:
    """A master not registered because it is in pre-online: found through the address it offered
    its slaves (``offeredMaster``), shown with the step it waits on."""
    for address in sorted({s.get("offeredMaster") for _, s in group["_members"] if s and s.get("offeredMaster")}):
        member = SimpleNamespace(address=address, broker_name=group["brokerName"], broker_id=0)
        status = await _member_status(member, timeout_ms)
        pre_online = (status or {}).get("preOnline")
        if pre_online and pre_online.get("step") != "ONLINE":
            master = {"brokerId": 0, "address": address, **status, "state": "PRE_ONLINE"}
            master.pop("slaves", None)
            return master
    return None


def _slave_row(member: Any, own: dict | None, master: dict | None) -> dict:
    seen = next((s for s in (master or {}).get("slaves", []) if s["slaveId"] == member.broker_id), None)
    row = {"brokerId": member.broker_id, "address": member.address,
           "role": own.get("role", "SLAVE") if own else None,
           "masterEpoch": own.get("masterEpoch", _last_epoch(own)) if own else None,
           "state": own["state"] if own and "state" in own else ("UNREACHABLE" if not own else own.get("role", "")), "lastClose": own.get("lastClose", "") if own else "",
           "maxOffset": own["maxOffset"] if own else None, "confirmOffset": own["confirmOffset"] if own else None,
           "connected": bool(seen and seen["connected"]), "inSyncStateSet": bool(seen and seen["inSyncStateSet"]),
           "learner": bool(seen and seen["learner"]),
           "ackOffset": seen["ackOffset"] if seen else (own.get("ackedOffset") if own else None),
           "specialServicesRunning": bool(own and own.get("specialServicesRunning")),
           "acting": bool(own and own.get("acting"))}
    if master is not None and row["ackOffset"] is not None:
        row["lagBytes"] = max(0, master["maxOffset"] - row["ackOffset"])
    else:
        row["lagBytes"] = None
    if master is not None and own is not None:
        row["lagMessages"] = max(0, master["queueOffsetTotal"] - own["queueOffsetTotal"])
    else:
        row["lagMessages"] = None
    return row


def _last_epoch(status: dict | None) -> int | None:
    epochs = (status or {}).get("epochs") or []
    return epochs[-1][0] if epochs else None


def _epoch_entries(status: dict) -> list[dict]:
    """The replica's epoch entries with their end offsets (the next one's start; the last ends at
    the replica's max offset), as mqadmin getBrokerEpoch prints them."""
    pairs = status.get("epochs") or []
    ends = [start for _, start in pairs[1:]] + [status.get("maxOffset")]
    return [{"epoch": epoch, "startOffset": start, "endOffset": end} for (epoch, start), end in zip(pairs, ends)]


def _unregistered_slaves(group: dict, registered: set[int], master: dict | None) -> list[dict]:
    """Slaves the master remembers (its status lists every slave that ever connected) but the
    nameserver no longer lists."""
    return [{"brokerId": s["slaveId"], "address": s.get("address") or "", "state": "NOT_REGISTERED", "lastClose": "",
             "maxOffset": None, "confirmOffset": None, "connected": bool(s["connected"]),
             "inSyncStateSet": bool(s["inSyncStateSet"]), "learner": bool(s["learner"]), "ackOffset": s["ackOffset"],
             "lagBytes": max(0, master["maxOffset"] - s["ackOffset"]), "lagMessages": None,
             "specialServicesRunning": None, "acting": None}
            for s in (master or {}).get("slaves", []) if s["slaveId"] not in registered]


def _controller_only_slaves(group: dict, replicas: list[dict]) -> list[dict]:
    """Rows for the controller's replicas of ``group`` that no row names yet (the master by its
    ``replicaId``, the slaves by their ids): ``replicas`` as get-sync-state-set lists them."""
    shown = {s["brokerId"] for s in group["slaves"]} | {group["master"].get("replicaId", 0)}
    return [{"brokerId": r["brokerId"], "address": r["address"], "state": "NOT_REGISTERED",
             "lastClose": "" if r["alive"] else "not alive at the controller", "maxOffset": None, "confirmOffset": None,
             "connected": False, "inSyncStateSet": bool(r["inSync"]), "learner": False, "ackOffset": None,
             "lagBytes": None, "lagMessages": None, "specialServicesRunning": None, "acting": None}
            for r in sorted(replicas, key=lambda r: r["brokerId"]) if r["brokerId"] not in shown]


async def _controller_replicas(args: Any, names: list[str]) -> dict[str, list[dict]]:
    """broker name -> the controller's replicas of it; {} when no controller answers."""
    from proto import controller_pb2 as pb
    from services.controller.client import ControllerClient, ControllerClientError

    addresses = list(getattr(args, "controller", None) or args.namesrv)
    timeout_s = args.timeout_ms / 1000
    client = ControllerClient(addresses, call_timeout_s=timeout_s, attempts=len(addresses), deadline_s=timeout_s,
                              retry_pause_s=0)
    try:
        reply = await client.call("GetSyncStateData", pb.GetSyncStateDataRequest(broker_names=names))
    except ControllerClientError:
        return {}
    finally:
        await client.close()
    if reply.status.code != pb.ControllerStatus.SUCCESS:
        return {}
    return {g.view.broker_name: [{"brokerId": r.broker_id, "address": r.address, "alive": r.alive,
                                  "inSync": r.in_sync} for r in g.replicas] for g in reply.groups}


async def collect(args: Any) -> list[dict]:
    members = [m for m in await _members(args, args.cluster) if not args.broker or m.broker_name == args.broker]
    if not members and (args.broker or args.cluster):
        which = f"broker {args.broker}" if args.broker else f"cluster {args.cluster}"
        raise CliError(f"{which} is not registered at nameserver {';'.join(args.namesrv)}", 1)
    statuses = await asyncio.gather(*(_member_status(m, args.timeout_ms) for m in members))
    groups: dict[tuple[str, str], dict] = {}
    for member, status in zip(members, statuses):
        group = groups.setdefault((member.cluster, member.broker_name),
                                  {"cluster": member.cluster, "brokerName": member.broker_name, "master": None,
                                   "slaves": [], "_members": []})
        group["_members"].append((member, status))
        if member.broker_id == 0:
            group["master"] = {"brokerId": 0, "address": member.address, **(status or {"state": "UNREACHABLE"})}
            group["master"].pop("slaves", None)
    controller = await _controller_replicas(args, sorted({name for _, name in groups}))
    for group in groups.values():
        if group["master"] is None:
            group["master"] = await _pre_online_master(group, args.timeout_ms)
        replicas = sorted(group.pop("_members"), key=lambda pair: pair[0].broker_id)
        master_status = next((s for m, s in replicas if m.broker_id == 0), None)
        group["slaves"] = [_slave_row(m, s, master_status) for m, s in replicas if m.broker_id != 0]
        group["slaves"] += _unregistered_slaves(group, {m.broker_id for m, _ in replicas}, master_status)
        if group["master"] is None:
            group["master"] = {"brokerId": 0, "address": "", "state": "NOT_REGISTERED"}
        group["slaves"] += _controller_only_slaves(group, controller.get(group["brokerName"], []))
        group["servable"] = group["master"].get("state") not in ("UNREACHABLE", "NOT_REGISTERED", "PRE_ONLINE")
    return [groups[key] for key in sorted(groups)]


def _render(document: dict) -> str:
    blocks = []
    for group in document["groups"]:
        master = group["master"] or {}
        if group["servable"]:
            head = (f"{group['brokerName']} ({group['cluster']}): master {master.get('address', 'none')} "
                    f"{master.get('brokerRole', '')} max {master.get('maxOffset', '?')} confirm {master.get('confirmOffset', '?')} "
                    f"SyncStateSet {master.get('syncStateSet', '?')}")
        elif master.get("state") == "PRE_ONLINE":
            head = (f"{group['brokerName']} ({group['cluster']}): master at {master['address']} in pre-online, "
                    f"not in routes yet: {_pre_online_text(master['preOnline'])}")
        elif any(s.get("acting") for s in group["slaves"]):
            where = f" at {master['address']}" if master.get("address") else ""
            head = (f"{group['brokerName']} ({group['cluster']}): master{where} {master['state']}: a slave acts for it "
                    "(reads, receives and delay, transaction and retry messages go on; no writes) until it returns")
        else:
            where = f" at {master['address']}" if master.get("address") else ""
            head = (f"{group['brokerName']} ({group['cluster']}): master{where} {master['state']}: nothing can be written "
                    f"or consumed here until it returns; the slaves below hold its messages")
        rows = [[s["brokerId"], s["address"], s["state"], "yes" if s["connected"] else "no", _dash(s["maxOffset"]),
                 _dash(s["ackOffset"]), _dash(s["lagBytes"]), _dash(s["lagMessages"]),
                 "yes" if s["inSyncStateSet"] else ("learner" if s["learner"] else "no"), _special(s)]
                for s in group["slaves"]]
        blocks.append(head + "\n" + table(["SLAVE", "ADDRESS", "STATE", "CONNECTED", "MAX OFFSET", "ACK OFFSET", "LAG BYTES",
                                           "LAG MESSAGES", "IN SET", "SPECIAL SERVICES"], rows))
    return "\n\n".join(blocks) or "no broker group registered"


def _pre_online_text(pre_online: dict) -> str:
    step, member = pre_online.get("step"), pre_online.get("waitingOn")
    what = {"FETCH_MEMBERS": "reading the group's members from the nameserver",
            "OFFER": f"telling slave {member} where it is", "WAIT_TRANSFER": f"waiting for slave {member}'s replication",
            "SYNC": f"pulling slave {member}'s tables", "ADOPT": f"adopting slave {member}'s tables",
            "RETRY_WAIT": "waiting to try again"}.get(step, step)
    failure = f" (last failure: {pre_online['lastFailure']})" if pre_online.get("lastFailure") else ""
    return f"{what}, attempt {pre_online.get('attempt')}, {pre_online.get('waitedMs')} ms in this step{failure}"


def _special(row: dict) -> str:
    """A slave's special services: acting for its absent master, or not running."""
    if row.get("specialServicesRunning") is None:
        return "-"
    return "acting" if row.get("acting") else ("running" if row["specialServicesRunning"] else "no")


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def ha_status(args: Any) -> int:
    groups = _run(collect(args))
    return _emit(args, {"groups": groups, "complete": all(g["servable"] and all(s["state"] not in ("UNREACHABLE", "NOT_REGISTERED")
                                                                          for s in g["slaves"]) for g in groups)}, _render)


def broker_epoch(args: Any) -> int:
    async def collect_epochs() -> dict:
        members = [m for m in await _members(args, args.cluster) if m.broker_name == args.broker]
        if not members:
            raise CliError(f"broker {args.broker} is not registered at nameserver {';'.join(args.namesrv)}", 1)
        statuses = await asyncio.gather(*(_member_status(m, args.timeout_ms) for m in members))
        replicas = []
        for member, status in sorted(zip(members, statuses), key=lambda pair: pair[0].broker_id):
            row = {"brokerId": member.broker_id, "address": member.address}
            if status is None:
                row.update(state="UNREACHABLE", epochs=None)
            else:
                row.update(state="OK", role=status.get("role"), replicaId=status.get("replicaId", member.broker_id),
                           maxOffset=status.get("maxOffset"), confirmOffset=status.get("confirmOffset"),
                           epochs=_epoch_entries(status))
            replicas.append(row)
        return {"brokerName": args.broker, "replicas": replicas,
                "complete": all(r["state"] == "OK" for r in replicas)}

    def render(document: dict) -> str:
        blocks = []
        for r in document["replicas"]:
            head = f"{document['brokerName']} id {r['brokerId']} at {r['address']}: " + (
                f"{r['role']}, max {r['maxOffset']}, confirm {r['confirmOffset']}" if r["state"] == "OK" else r["state"])
            rows = [[e["epoch"], e["startOffset"], e["endOffset"]] for e in r["epochs"] or []]
            blocks.append(head + ("\n" + table(["EPOCH", "START OFFSET", "END OFFSET"], rows) if rows else ""))
        return "\n\n".join(blocks)
    return _emit(args, _run(collect_epochs()), render)


def register(subparsers: Any, admin_subparsers: Any) -> None:
    from container.cli_admin import host_ports

    p = _add(admin_subparsers, "ha-status", ha_status, "per broker group: master, slaves' acked offsets, lag, connection",
             hidden_aliases=("haStatus",))
    cluster_option(p)
    broker_option(p, help_text="only this broker group")
    p.add_argument("--controller", type=host_ports, default=None, metavar="HOST:PORT[;HOST:PORT...]",
                   help="controller member(s) to list replicas nobody registered (default: the nameserver, "
                        "which embeds the controller in conf/controller-mode)")
    p = _add(admin_subparsers, "get-broker-epoch", broker_epoch,
             "each replica's epoch entries with start and end offsets (mqadmin getBrokerEpoch)",
             hidden_aliases=("getBrokerEpoch",))
    cluster_option(p)
    broker_option(p, required=True, help_text="the broker group")
