"""The AclAdmin gRPC servicer: mqadmin's createUser ... listAcl on a store of users and ACLs.

The store is one of three: a container's file (:class:`services.access.acl_store.AclStore`),
a container's copy of the controller's (:class:`services.access.acl_replica.ReplicatedAclStore`,
which has ``forward``), or the controller's own (:class:`services.controller.acl.ControllerAcl`).

Rules:
- Requests are parsed here with :mod:`metadata.acl_model`'s ``parse_*`` (the gateway); a
  bad value is INVALID_ARGUMENT ``<REASON>: <detail>``.
- A change is a :mod:`metadata.acl_state` command run by the store's ``change``: decided
  on the current state, written to the file (or committed by the controller), then enforced.
  A store with ``forward`` sends the request, once parsed here, to the controller instead.  A refused command is a status
  named by its :class:`AclRejection` (NOT_FOUND, ALREADY_EXISTS or FAILED_PRECONDITION); an
  accepted one answers the version it made.
- Reads answer the version they read; passwords are never sent back.
- Exceptions become statuses in one place, :func:`_rpc`.  Without a store (no
  ``authorizationMetadataFile``) every call is FAILED_PRECONDITION ``AUTHORIZATION_OFF``.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import grpc

from metadata import acl_state
from metadata.acl_model import (Acl, AclInputError, AclRejection, Policy, PolicyDecision, PolicyEntry, PolicyType,
                                UserStatus, UserType, parse_actions, parse_password, parse_resource, parse_source_ips,
                                parse_subject, parse_username)
from metadata.acl_state import AclCommandDecision, AclState
from proto import acl_admin_pb2 as pb
from proto import acl_admin_pb2_grpc as pb_grpc
from services.access.acl_store import AclFileBad, AclUnavailable

log = logging.getLogger(__name__)
_CODES = {AclRejection.NO_SUCH_USER: grpc.StatusCode.NOT_FOUND, AclRejection.NO_SUCH_ACL: grpc.StatusCode.NOT_FOUND,
          AclRejection.NO_SUCH_POLICY_ENTRY: grpc.StatusCode.NOT_FOUND,
          AclRejection.USER_EXISTS: grpc.StatusCode.ALREADY_EXISTS}
MAX_LISTED = 10_000


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code, self.details = code, details


def _rpc(method: Callable) -> Callable:
    @functools.wraps(method)
    async def wrapper(self: "AclAdminServicer", request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            if self.store is None:
                raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, "AUTHORIZATION_OFF: this container has no "
                                                                    "authorizationMetadataFile")
            return await method(self, request)
        except grpc.aio.AioRpcError as exc:  # a forwarded change refused by the controller: as it said
            code, details = exc.code(), exc.details() or exc.code().name
        except AclUnavailable as exc:
            code, details = grpc.StatusCode.UNAVAILABLE, str(exc)
        except AclInputError as exc:
            code, details = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
        except AclFileBad as exc:
            code, details = grpc.StatusCode.FAILED_PRECONDITION, f"ACL_FILE_BAD: {exc}"
        except OSError as exc:  # the write failed: nothing was enforced (AclStore.change persists first)
            log.error("ACL change not written: %s", exc)
            code, details = grpc.StatusCode.UNAVAILABLE, f"ACL_FILE_NOT_WRITTEN: {exc.strerror or exc}; nothing changed"
        except _Refused as exc:
            code, details = exc.code, exc.details
        await context.abort(code, details)
    return wrapper


def _user_type(text: str) -> UserType:
    return UserType.parse(text, AclRejection.INVALID_USER_TYPE)


def _user_status(text: str) -> UserStatus:
    return UserStatus.parse(text, AclRejection.INVALID_USER_STATUS)


def acl_from_proto(record: pb.AclRecord) -> tuple[str, tuple[Policy, ...]]:
    """(username, policies) of a request's ACL, each value parsed; AclInputError when bad."""
    username = parse_subject(record.subject)
    policies: dict[PolicyType, list[PolicyEntry]] = {}
    for policy in record.policies:
        kind = PolicyType.parse(policy.policy_type or "Custom", AclRejection.INVALID_POLICY_TYPE)
        for entry in policy.entries:
            policies.setdefault(kind, []).append(PolicyEntry(
                parse_resource(entry.resource), parse_actions(list(entry.actions)),
                PolicyDecision.parse(entry.decision, AclRejection.INVALID_DECISION),
                parse_source_ips(list(entry.source_ips))))
    return username, tuple(Policy(kind, tuple(entries)) for kind, entries in policies.items())


def acl_to_proto(acl: Acl) -> pb.AclRecord:
    return pb.AclRecord(subject=acl.subject, policies=[
        pb.AclPolicy(policy_type=policy.policy_type.value, entries=[
            pb.AclPolicyEntry(resource=entry.resource.key, actions=sorted(a.value for a in entry.actions),
                              decision=entry.decision.value, source_ips=list(entry.source_ips))
            for entry in policy.entries])
        for policy in acl.policies])


def _user_proto(state: AclState, username: str) -> pb.AclUser:
    user = state.users[username]
    return pb.AclUser(username=user.username, user_type=user.user_type.value, user_status=user.status.value)


def _enforcer_proto(report, age_ms: int) -> pb.AclEnforcer:
    return pb.AclEnforcer(container=report.container, brokers=list(report.brokers), version=report.stamp.version,
                          origin=report.stamp.origin, reported_ms_ago=age_ms)


class AclAdminServicer(pb_grpc.AclAdminServicer):
    def __init__(self, store: Any):
        self.store = store

    async def _change(self, method: str, request: Any, decide: Callable[[AclState], AclCommandDecision]) -> pb.AclDone:
        forward = getattr(self.store, "forward", None)
        if forward is not None:  # under a controller: it decides and commits
            reply = await forward(method, request)
            return pb.AclDone(version=reply.version, detail=reply.detail, replicated=True, source=self.store.source)
        decision = await self.store.change(decide)
        if isinstance(decision.reply, acl_state.Rejected):
            reason = decision.reply.reason
            raise _Refused(_CODES.get(reason, grpc.StatusCode.FAILED_PRECONDITION), f"{reason.value}: {decision.reply.detail}")
        return pb.AclDone(version=self.store.state.version, detail=decision.reply.detail,
                          replicated=self.store.replicated, source=self.store.source)

    def _acls_response(self, state: AclState, records: list) -> pb.AclAclsResponse:
        enforcers = getattr(self.store, "enforcers", lambda: [])()
        age = getattr(self.store, "age_ms", lambda report: 0)
        return pb.AclAclsResponse(version=state.version, acls=records, source=self.store.source,
                                  entries=state.entry_count, origin=self.store.origin,
                                  enforcers=[_enforcer_proto(r, age(r)) for r in enforcers])

    # ---- users

    @_rpc
    async def CreateUser(self, request: pb.AclCreateUserRequest) -> pb.AclDone:
        user = request.user
        username, password = parse_username(user.username), parse_password(user.password)
        kind = _user_type(user.user_type or "Normal")
        status = _user_status(user.user_status or "enable")
        return await self._change("CreateUser", request, lambda s: acl_state.create_user(s, username, password, kind, status))

    @_rpc
    async def UpdateUser(self, request: pb.AclUpdateUserRequest) -> pb.AclDone:
        username = parse_username(request.username)
        password = parse_password(request.password) if request.HasField("password") else None
        kind = _user_type(request.user_type) if request.HasField("user_type") else None
        status = _user_status(request.user_status) if request.HasField("user_status") else None
        return await self._change("UpdateUser", request, lambda s: acl_state.update_user(s, username, password, kind, status))

    @_rpc
    async def DeleteUser(self, request: pb.AclUsernameRequest) -> pb.AclDone:
        username = parse_username(request.username)
        return await self._change("DeleteUser", request, lambda s: acl_state.delete_user(s, username))

    @_rpc
    async def GetUser(self, request: pb.AclUsernameRequest) -> pb.AclUsersResponse:
        username, state = parse_username(request.username), self.store.state
        if username not in state.users:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"{AclRejection.NO_SUCH_USER.value}: no user {username!r}")
        return pb.AclUsersResponse(version=state.version, users=[_user_proto(state, username)])

    @_rpc
    async def ListUser(self, request: pb.AclListUserRequest) -> pb.AclUsersResponse:
        state = self.store.state
        names = [name for name in sorted(state.users) if request.filter in name][:MAX_LISTED]
        return pb.AclUsersResponse(version=state.version, users=[_user_proto(state, name) for name in names])

    # ---- ACLs

    @_rpc
    async def CreateAcl(self, request: pb.AclPutRequest) -> pb.AclDone:
        username, policies = acl_from_proto(request.acl)
        return await self._change("CreateAcl", request, lambda s: acl_state.create_acl(s, username, policies))

    @_rpc
    async def UpdateAcl(self, request: pb.AclPutRequest) -> pb.AclDone:
        username, policies = acl_from_proto(request.acl)
        return await self._change("UpdateAcl", request, lambda s: acl_state.update_acl(s, username, policies))

    @_rpc
    async def DeleteAcl(self, request: pb.AclDeleteRequest) -> pb.AclDone:
        username = parse_subject(request.subject)
        resource = parse_resource(request.resource) if request.resource else None
        kind = PolicyType.parse(request.policy_type or "Custom", AclRejection.INVALID_POLICY_TYPE)
        return await self._change("DeleteAcl", request, lambda s: acl_state.delete_acl(s, username, resource, kind))

    @_rpc
    async def GetAcl(self, request: pb.AclSubjectRequest) -> pb.AclAclsResponse:
        username, state = parse_subject(request.subject), self.store.state
        acl = state.acls.get(username)
        if acl is None:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"{AclRejection.NO_SUCH_ACL.value}: User:{username} has no ACL")
        return self._acls_response(state, [acl_to_proto(acl)])

    @_rpc
    async def ListAcl(self, request: pb.AclListRequest) -> pb.AclAclsResponse:
        state = self.store.state
        records = []
        for name in sorted(state.acls):
            record = acl_to_proto(state.acls[name])
            if request.subject_filter not in record.subject:
                continue
            if request.resource_filter and not any(request.resource_filter in entry.resource
                                                   for policy in record.policies for entry in policy.entries):
                continue
            records.append(record)
            if len(records) >= MAX_LISTED:
                break
        return self._acls_response(state, records)


def add_acl_admin_service(server, store: Any) -> None:
    pb_grpc.add_AclAdminServicer_to_server(AclAdminServicer(store), server)
