"""A slave's metadata sync from a master whose container has authorization on: signed with
``innerClientAuthenticationCredentials`` it is served; unsigned or by a user without Get on
the cluster it is refused, reported, and nothing is adopted."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from scheduler.clock import SystemClock
from services.access.acl_store import AclStore
from services.access.admin_gate import AdminGate
from services.admin.client import Credentials
from services.admin.service import add_admin_service
from services.ha.metadata_sync import MetadataSync, SyncOutcome, SyncProblem
from services.request_guard import GuardedServer, RequestGuard
from tests.integration.test_metadata_sync import OneContainer, load_master, start_pair

pytestmark = pytest.mark.integration
ACL = '''[[users]]
username = "sync"
password = "sync-secret"
[[users]]
username = "producer1"
password = "producer1-secret"
[[acls]]
subject = "User:sync"
[[acls.policies]]
resources = ["Cluster"]
actions = ["Get"]
decision = "Allow"
'''


def test_metadata_sync_is_served_only_when_signed_by_a_user_allowed_get_on_the_cluster(tmp_path):
    (tmp_path / "acl.toml").write_text(ACL)
    store = AclStore.open(tmp_path / "acl.toml")

    async def scenario():
        master, slave = await start_pair(tmp_path)
        await load_master(master)
        server = grpc.aio.server()
        gate = AdminGate(GuardedServer(server, RequestGuard()), store, SystemClock().now_ms, 900_000,
                         lambda request: "DefaultCluster")
        add_admin_service(gate, OneContainer(master.broker))
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        syncs = []
        try:
            for credentials, problem in ((None, "UNAUTHORIZED"), (Credentials("producer1", "producer1-secret"), "FORBIDDEN")):
                syncs.append(MetadataSync(slave.broker, lambda: address, slave.clock, credentials=credentials))
                report = await syncs[-1].sync_once()
                assert (report.outcome, report.problem) == (SyncOutcome.FAILED, SyncProblem.MASTER_REFUSED), report
                assert report.detail.startswith(problem) and slave.broker.topic_table().topics == {}
            syncs.append(MetadataSync(slave.broker, lambda: address, slave.clock, credentials=Credentials("sync", "sync-secret")))
            report = await syncs[-1].sync_once()
            assert report.outcome is SyncOutcome.SYNCED, report
            assert set(slave.broker.topic_table().topics) == set(master.broker.topic_table().topics)
        finally:
            for sync in syncs:
                await sync.close()
            await server.stop(0)
            await master.stop()
            await slave.stop()
    asyncio.run(scenario())
