"""The AclAdmin servicer over a file store: mqadmin's user and ACL commands, their replies and refusals."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.acl_model import Action, Resource
from proto import acl_admin_pb2 as pb
from services.access.acl_admin import AclAdminServicer
from services.access.acl_store import AclStore


class Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class Context:
    async def abort(self, code, details):
        raise Aborted(code, details)


@pytest.fixture
def servicer(tmp_path) -> AclAdminServicer:
    path = tmp_path / "acl.toml"
    path.write_text('[[users]]\nusername = "admin"\npassword = "admin-secret"\nuserType = "Super"\n')
    return AclAdminServicer(AclStore.open(path))


def call(servicer, method: str, request):
    return asyncio.run(getattr(servicer, method)(request, Context()))


def refused(servicer, method: str, request) -> Aborted:
    with pytest.raises(Aborted) as caught:
        call(servicer, method, request)
    return caught.value


def entry(resource: str, *actions: str, decision: str = "Allow", ips=()) -> pb.AclPolicyEntry:
    return pb.AclPolicyEntry(resource=resource, actions=list(actions), decision=decision, source_ips=list(ips))


def test_users_are_created_changed_listed_without_passwords_and_deleted(servicer):
    done = call(servicer, "CreateUser", pb.AclCreateUserRequest(user=pb.AclUser(username="p1", password="p1-secret")))
    assert done.version == 2 and "p1" in done.detail
    assert servicer.store.secret_key("p1") == "p1-secret"
    listed = call(servicer, "ListUser", pb.AclListUserRequest())
    assert [(u.username, u.user_type, u.user_status, u.password) for u in listed.users] == \
        [("admin", "Super", "enable", ""), ("p1", "Normal", "enable", "")]
    assert call(servicer, "UpdateUser", pb.AclUpdateUserRequest(username="p1", user_status="disable")).version == 3
    assert servicer.store.disabled("p1")
    assert refused(servicer, "CreateUser", pb.AclCreateUserRequest(user=pb.AclUser(username="p1", password="x"))).code \
        is grpc.StatusCode.ALREADY_EXISTS
    assert "INVALID_USER_TYPE" in refused(servicer, "CreateUser", pb.AclCreateUserRequest(
        user=pb.AclUser(username="p2", password="x", user_type="Root"))).details
    assert call(servicer, "DeleteUser", pb.AclUsernameRequest(username="p1")).version == 4
    missing = refused(servicer, "GetUser", pb.AclUsernameRequest(username="p1"))
    assert missing.code is grpc.StatusCode.NOT_FOUND and missing.details.startswith("NO_SUCH_USER")


def test_acls_are_merged_shown_with_the_version_and_removed_entry_by_entry(servicer):
    call(servicer, "CreateUser", pb.AclCreateUserRequest(user=pb.AclUser(username="p1", password="p1-secret")))
    record = pb.AclRecord(subject="User:p1", policies=[pb.AclPolicy(entries=[
        entry("Topic:orders", "Pub"), entry("Group:billing", "Sub", ips=["10.0.0.0/8"])])])
    assert call(servicer, "CreateAcl", pb.AclPutRequest(acl=record)).version == 3
    more = pb.AclRecord(subject="User:p1", policies=[pb.AclPolicy(policy_type="Default", entries=[
        entry("Topic:*", "All", decision="Deny")])])
    assert call(servicer, "UpdateAcl", pb.AclPutRequest(acl=more)).version == 4
    state = servicer.store.state
    assert state.authorize("p1", Action.PUB, Resource.topic("orders"), "1.2.3.4").allowed
    assert not state.authorize("p1", Action.SUB, Resource.group("billing"), "1.2.3.4").allowed  # not from 10/8
    shown = call(servicer, "GetAcl", pb.AclSubjectRequest(subject="User:p1"))
    assert shown.version == 4 and shown.entries == 3 and shown.source == str(servicer.store.path)
    assert [(p.policy_type, [e.resource for e in p.entries]) for p in shown.acls[0].policies] == \
        [("Custom", ["Topic:orders", "Group:billing"]), ("Default", ["Topic:*"])]
    assert [r.subject for r in call(servicer, "ListAcl", pb.AclListRequest(resource_filter="billing")).acls] == ["User:p1"]
    assert not call(servicer, "ListAcl", pb.AclListRequest(subject_filter="nobody")).acls
    assert call(servicer, "DeleteAcl", pb.AclDeleteRequest(subject="User:p1", resource="Topic:orders")).version == 5
    gone = refused(servicer, "DeleteAcl", pb.AclDeleteRequest(subject="User:p1", resource="Topic:orders"))
    assert gone.code is grpc.StatusCode.NOT_FOUND and gone.details.startswith("NO_SUCH_POLICY_ENTRY")
    bad = refused(servicer, "CreateAcl", pb.AclPutRequest(acl=pb.AclRecord(subject="User:p1", policies=[
        pb.AclPolicy(entries=[entry("Topic:orders", "Publish")])])))
    assert bad.code is grpc.StatusCode.INVALID_ARGUMENT and "INVALID_ACTION" in bad.details
    assert servicer.store.state.version == 5


def test_without_a_store_every_call_says_authorization_is_off():
    off = refused(AclAdminServicer(None), "ListAcl", pb.AclListRequest())
    assert off.code is grpc.StatusCode.FAILED_PRECONDITION and off.details.startswith("AUTHORIZATION_OFF")


def test_a_change_that_cannot_be_written_changes_nothing(servicer, monkeypatch):
    import services.access.acl_store as acl_store

    def full(path, text):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(acl_store, "write_atomically", full)
    failed = refused(servicer, "CreateUser", pb.AclCreateUserRequest(user=pb.AclUser(username="p1", password="x")))
    assert failed.code is grpc.StatusCode.UNAVAILABLE and "No space left" in failed.details
    assert servicer.store.state.version == 1 and "p1" not in servicer.store.state.users
