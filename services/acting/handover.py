"""A returning master taking its group's special state back (RIP-32; the rules of what is
adopted are ``services.broker.acting_mode``'s).

Rules:
- It runs once a master with acting mode is registered with the nameserver (so its members
  learn that it is back and no view learned later lets a slave act), before its special
  services start: it reads the group's member set and asks every other member, in id order,
  to hand over (``HandOver``, deadline ``handoverTimeoutMillis``).  A member stops acting
  before it answers (its runs in progress finish first); the master adopts what it answered.
- A member that does not answer is skipped (it is likely dead: nothing it advanced can be
  taken back), as is the whole step when the nameserver cannot be reached; the master then
  goes on with its own state.  Either way the hand-over ends, and the special services start.
- Conversions to and from the wire are here (documents travel as JSON).
"""
from __future__ import annotations

import json
import logging

from metadata.consumer_offsets import parse_document as parse_offsets
from metadata.data_version import DataVersion
from metadata.replica_metadata import VersionedDocument
from proto import acting_pb2 as pb
from services.acting.client import ActingClient, ActingError
from services.broker.acting_mode import HandOverState, adopt_handover

log = logging.getLogger(__name__)


def _document_to_proto(document: VersionedDocument) -> pb.ActingVersionedDocument:
    version = document.data_version
    return pb.ActingVersionedDocument(state_version=version.state_version, timestamp_ms=version.timestamp_ms,
                                      counter=version.counter,
                                      document_json=json.dumps(dict(document.document), separators=(",", ":")).encode())


def _document_from_proto(message: pb.ActingVersionedDocument) -> VersionedDocument:
    version = DataVersion(message.state_version, message.timestamp_ms, message.counter)
    return VersionedDocument(version, json.loads(message.document_json or b"{}"))


def hand_over_to_proto(state: HandOverState) -> pb.ActingHandOverResponse:
    offsets = VersionedDocument(state.offsets.data_version, state.offsets.to_document())
    return pb.ActingHandOverResponse(acted=state.acted, timer=_document_to_proto(state.timer),
                                     transactions=_document_to_proto(state.transactions),
                                     pop=_document_to_proto(state.pop), offsets=_document_to_proto(offsets))


def hand_over_from_proto(reply: pb.ActingHandOverResponse) -> HandOverState:
    offsets = _document_from_proto(reply.offsets)
    return HandOverState(reply.acted, _document_from_proto(reply.timer), _document_from_proto(reply.transactions),
                         _document_from_proto(reply.pop), parse_offsets(dict(offsets.document), "hand-over offsets"))


async def take_over(broker, nameserver, client: ActingClient) -> None:
    """Adopt every other member's special state, then let the special services start."""
    try:
        await _adopt_from_members(broker, nameserver, client)
    except Exception:  # a bug here must not keep the master's special services off for good
        log.exception("%s: hand-over failed; going on with this master's own state", broker.name)
    broker.acting.handover_done = True
    await broker.apply_role()


async def _adopt_from_members(broker, nameserver, client: ActingClient) -> None:
    try:
        members = dict((await nameserver.broker_member_group(broker.name, broker.cluster)).members)
    except Exception as exc:  # nobody to ask: this master's own state it is
        log.warning("%s: hand-over skipped, member set unavailable (%s)", broker.name, exc)
        members = {}
    own = broker.config.broker_id
    for member_id, address in sorted(members.items()):
        if member_id == own:
            continue
        request = pb.ActingHandOverRequest(broker_name=broker.name, broker_id=member_id)
        try:
            reply = await client.call(address, "HandOver", request, broker.config.handover_timeout_ms)
            state = hand_over_from_proto(reply)
        except (ActingError, ValueError) as exc:
            log.warning("%s: member %d at %s did not hand over (%s); skipped", broker.name, member_id, address, exc)
            continue
        try:
            decisions = adopt_handover(broker, state)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("%s: member %d's hand-over is malformed (%s); skipped", broker.name, member_id, exc)
            continue
        log.info("%s: hand-over from member %d (%s): %s", broker.name, member_id, "acted" if state.acted else "did not act",
                 ", ".join(f"{item} {type(d).__name__.lower()} {d.remote_version.to_json()}" for item, d in decisions.items()))
