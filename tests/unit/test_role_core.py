"""A broker's role under the controller as pure decisions (ha/role): role changes and their
fencing, the pause fence, and the identity registration that resumes from its files."""
from __future__ import annotations

import pytest

from ha.role.decisions import (AdoptSyncStateSet, BecomeMaster, BecomeSlave, Elect, GroupView, Ignore, IgnoreReason,
                               LocalRole, RenewEpoch, Role, after, decide)
from ha.role.fence import PauseFence
from ha.role.identity import (AskNextId, ApplyId, DeleteTempAndRestart, Identity, IdentityRegistration, Refuse,
                              Register, RegisterState, TempIdentity, WriteIdentity, WriteTemp, parse_identity,
                              parse_temp)

ME = 2
FENCED = LocalRole()
MASTER_5 = LocalRole(Role.MASTER, 5, 7, ME, "", 5)
SLAVE_OF_1_AT_5 = LocalRole(Role.SLAVE, 5, 0, 1, "c1:10911", 5)


def view(master, epoch, sss_epoch=1, members=(1, 2), address=None):
    return GroupView(master, address if address is not None else (f"c{master}:10911" if master else ""), epoch,
                     sss_epoch, frozenset(members))


@pytest.mark.parametrize("name, local, seen, expected", [
    ("fenced, no master yet: elect", FENCED, view(None, 0), Elect(step_down=False)),
    ("fenced, named master: become master with a new epoch entry", FENCED, view(ME, 3, 4, (ME,)),
     BecomeMaster(3, frozenset({ME}), 4)),
    ("restart named master at the epoch already in the file: never resume it, renew", LocalRole(file_epoch=3),
     view(ME, 3, 4), RenewEpoch(3, step_down=False)),
    ("stepped down, then an old view names it master at its epoch again: renew (seed 1332)",
     LocalRole(Role.FENCED, 5, 7, None, "", 5), view(ME, 5, 7, (ME,)), RenewEpoch(5, step_down=False)),
    ("slave whose file is at a newer epoch than it acts on, named master there: renew",
     LocalRole(Role.SLAVE, 4, 0, 1, "c1:10911", 5), view(ME, 5), RenewEpoch(5, step_down=False)),
    ("master at an older epoch, named master at its file's newer epoch: stop writing, renew",
     LocalRole(Role.MASTER, 4, 7, ME, "", 5), view(ME, 5), RenewEpoch(5, step_down=True)),
    ("named master one epoch past the file: a new entry", LocalRole(file_epoch=3), view(ME, 4, 5),
     BecomeMaster(4, frozenset({1, 2}), 5)),
    ("the controller's epoch is older than the file's: refuse", LocalRole(file_epoch=6), view(ME, 3),
     Ignore(IgnoreReason.EPOCH_FILE_AHEAD)),
    ("fenced, another master: follow it", FENCED, view(1, 3), BecomeSlave(1, "c1:10911", 3, reconnect=True)),
    ("master sees an older epoch: ignore (no step back)", MASTER_5, view(1, 4), Ignore(IgnoreReason.STALE_EPOCH)),
    ("master sees a newer master elsewhere: step down to slave", MASTER_5, view(1, 6),
     BecomeSlave(1, "c1:10911", 6, reconnect=True)),
    ("master sees a newer epoch with no master: stop writing, then elect", MASTER_5, view(None, 6),
     Elect(step_down=True)),
    ("master, same epoch, newer set: adopt it", MASTER_5, view(ME, 5, 8, (ME,)), AdoptSyncStateSet(frozenset({ME}), 8)),
    ("master, same epoch, old set: nothing", MASTER_5, view(ME, 5, 7), Ignore(IgnoreReason.UP_TO_DATE)),
    ("master re-elected at a newer epoch: a new entry", MASTER_5, view(ME, 6, 9), BecomeMaster(6, frozenset({1, 2}), 9)),
    ("slave, same master and epoch: nothing", SLAVE_OF_1_AT_5, view(1, 5), Ignore(IgnoreReason.UP_TO_DATE)),
    ("slave, same master at a newer epoch: fence with it, no reconnect", SLAVE_OF_1_AT_5, view(1, 6),
     BecomeSlave(1, "c1:10911", 6, reconnect=False)),
    ("slave, same master at a new address: reconnect", SLAVE_OF_1_AT_5, view(1, 5, address="c1b:10911"),
     BecomeSlave(1, "c1b:10911", 5, reconnect=True)),
    ("slave, a new master: reconnect", SLAVE_OF_1_AT_5, view(3, 6), BecomeSlave(3, "c3:10911", 6, reconnect=True)),
    ("slave promoted", SLAVE_OF_1_AT_5, view(ME, 6, 2, (ME,)), BecomeMaster(6, frozenset({ME}), 2)),
])
def test_role_decisions(name, local, seen, expected):
    assert decide(local, seen, ME) == expected, name


def test_after_a_decision_the_old_epoch_is_never_taken_again():
    local = after(FENCED, decide(FENCED, view(1, 3), ME))
    assert local.role is Role.SLAVE and local.master_epoch == 3
    assert decide(local, view(ME, 2), ME) == Ignore(IgnoreReason.STALE_EPOCH)
    promoted = after(local, decide(local, view(ME, 4, 5, (ME,)), ME))
    assert promoted.role is Role.MASTER and promoted.file_epoch == 4
    fenced = after(promoted, decide(promoted, view(None, 5), ME))
    assert fenced.role is Role.FENCED


def test_a_broker_becomes_master_only_at_an_epoch_newer_than_its_file():
    """Whatever the view, BecomeMaster's epoch is past the file's last epoch (a broker never
    resumes an epoch), and a renewal names exactly the file's last epoch."""
    for role in Role:
        for acting in range(0, 5):
            for file_epoch in range(acting, 6):
                local = LocalRole(role, acting, 1, ME if role is Role.MASTER else 1, "", file_epoch)
                for epoch in range(acting, 7):
                    decision = decide(local, view(ME, epoch), ME)
                    if isinstance(decision, BecomeMaster):
                        assert decision.epoch > file_epoch, (local, epoch)
                    if isinstance(decision, RenewEpoch):
                        assert decision.epoch == file_epoch and not (role is Role.MASTER and acting == epoch)
                    after_local = after(local, decision)
                    assert after_local.file_epoch >= file_epoch


def test_a_renewal_stops_a_master_and_leaves_the_epoch_it_acts_on():
    local = LocalRole(Role.MASTER, 4, 7, ME, "", 5)
    renewed = after(local, RenewEpoch(5, step_down=True))
    assert renewed.role is Role.FENCED and renewed.master_epoch == 4 and renewed.file_epoch == 5
    assert after(FENCED, RenewEpoch(3, step_down=False)) == FENCED


def test_the_pause_fence_stops_writes_after_a_pause_until_confirmed():
    fence = PauseFence(timeout_ms=1000)
    assert fence.writable(0)
    assert not fence.tick(0) and not fence.tick(200) and fence.writable(1100)
    assert not fence.writable(1201)            # the tick is late: a pause is under way
    assert fence.tick(5000) and not fence.writable(5001)
    fence.confirmed()
    assert fence.writable(5001)


@pytest.mark.parametrize("text, parsed", [
    ("DefaultCluster#broker-a#1", Identity("DefaultCluster", "broker-a", 1)),
    ("DefaultCluster#broker-a#1\n", Identity("DefaultCluster", "broker-a", 1)),
    ("DefaultCluster#broker-a#0", None), ("DefaultCluster#broker-a", None), ("#broker-a#1", None),
    ("DefaultCluster#broker-a#x", None), ("a#b#1#c", None),
])
def test_identity_file_parsing(text, parsed):
    assert parse_identity(text) == parsed


def test_temp_file_round_trips():
    temp = TempIdentity("C", "b", 3, "127.0.0.1:10911;1700000000000")
    assert parse_temp(temp.render()) == temp
    assert parse_temp("C#b#3#no-timestamp") is None


def test_a_new_broker_asks_for_an_id_writes_the_temp_file_applies_then_registers():  # the normal path
    reg = IdentityRegistration("C", "b", "127.0.0.1:10911")
    assert reg.start(None, None) == AskNextId()
    step = reg.next_id(1, 1000)
    assert step == WriteTemp(TempIdentity("C", "b", 1, "127.0.0.1:10911;1000"))
    assert reg.temp_written(step.temp) == ApplyId(step.temp)
    assert reg.applied(True) == WriteIdentity(Identity("C", "b", 1))
    assert reg.identity_written() == Register(1)
    reg.registered()
    assert reg.state is RegisterState.REGISTERED


def test_scenario_40_a_restart_with_a_new_address_keeps_the_id():
    reg = IdentityRegistration("C", "b", "127.0.0.1:20911")
    assert reg.start("C#b#4", None) == Register(4)


def test_scenarios_41_42_a_crash_around_the_apply_applies_again_with_the_same_check_code():
    temp = TempIdentity("C", "b", 2, "127.0.0.1:10911;1000")
    reg = IdentityRegistration("C", "b", "127.0.0.1:10911")
    assert reg.start(None, temp.render()) == ApplyId(temp)
    assert reg.applied(True) == WriteIdentity(Identity("C", "b", 2))


def test_scenario_43_an_id_taken_meanwhile_starts_again():
    temp = TempIdentity("C", "b", 2, "127.0.0.1:10911;1000")
    reg = IdentityRegistration("C", "b", "127.0.0.1:10911")
    reg.start(None, temp.render())
    assert reg.applied(False) == DeleteTempAndRestart()
    assert reg.restarted() == AskNextId() and reg.state is RegisterState.INITIAL


@pytest.mark.parametrize("identity", ["Other#b#1", "C#other#1", "garbage"])
def test_scenario_44_an_identity_file_of_another_group_is_refused(identity):
    reg = IdentityRegistration("C", "b", "127.0.0.1:10911")
    step = reg.start(identity, None)
    assert isinstance(step, Refuse) and reg.state is RegisterState.REFUSED
    assert "brokerIdentity" in step.reason


def test_a_temp_file_of_another_group_or_torn_is_dropped():
    reg = IdentityRegistration("C", "b", "127.0.0.1:10911")
    assert reg.start(None, "Other#b#1#x;1") == DeleteTempAndRestart()
    assert reg.start(None, "C#b#") == DeleteTempAndRestart()
