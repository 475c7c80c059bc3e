"""The pre-online state machine (ha/role/pre_online.py), by transcripts: each line is one event
at a time, and the action and step it must produce."""
from __future__ import annotations

import pytest

from ha.role.pre_online import Action, Member, OnlineReason, PreOnline, Settings, Step, pre_online_needed

S1, S2 = Member(1, "c2:1"), Member(2, "c3:1")
SETTINGS = Settings(self_id=0, transfer_timeout_ms=10_000, retry_interval_ms=1_000)
FETCH = Action(fetch_members=True)
WAIT = Action()


def offer(member):
    return Action(offer=member)


def pull(member):
    return Action(pull=member)


def adopt(member):
    return Action(adopt=member)


def online(reason):
    return Action(online=reason)


def play(script, settings=SETTINGS):
    """``script``: (now_ms, event, args, expected action, expected step) lines."""
    core = PreOnline(settings, 0)
    for line, (now, event, args, action, step) in enumerate(script):
        got = {"start": lambda: core.start(now),
               "members": lambda: core.members_fetched(args, now),
               "members_down": lambda: core.members_unavailable("nameserver down", now),
               "offer": lambda: core.offer_answered(args[0], args[1], now, "refused"),
               "conn": lambda: core.connections(frozenset(args), now),
               "pulled": lambda: core.pulled(args[0], args[1], now, "boom"),
               "adopted": lambda: core.adopted(args[0], args[1], now, "bad"),
               "tick": lambda: core.tick(now)}[event]()
        assert (got, core.step) == (action, step), f"line {line}: {event} {args}"
    return core


def test_needed_only_by_a_fixed_role_master_with_other_replicas_and_no_skip():
    assert pre_online_needed(True, 2, False, False)
    assert not pre_online_needed(False, 2, False, False)  # a slave
    assert not pre_online_needed(True, 1, False, False)  # alone
    assert not pre_online_needed(True, 2, True, False)  # skipPreOnline
    assert not pre_online_needed(True, 2, False, True)  # controller mode: the controller elects in-sync masters


def test_the_whole_way_offer_transfer_pull_adopt_online():
    core = play([
        (0, "start", None, FETCH, Step.FETCH_MEMBERS),
        (5, "members", {0: "self:1", 1: "c2:1"}, offer(S1), Step.OFFER),  # itself left out (an old registration)
        (9, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
        (400, "conn", {1}, pull(S1), Step.SYNC),
        (450, "pulled", (1, True), adopt(S1), Step.ADOPT),
        (460, "adopted", (1, True), online(OnlineReason.SYNCED), Step.ONLINE),
    ])
    status = core.status(500)
    assert status["onlineAfterMs"] == 460 and status["synced"] == [1] and status["onlineReason"] == "SYNCED"


def test_a_member_already_transferring_is_pulled_without_waiting():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "conn", {1}, WAIT, Step.FETCH_MEMBERS),
          (2, "members", {1: "c2:1"}, offer(S1), Step.OFFER),
          (3, "offer", (1, True), pull(S1), Step.SYNC)])


def test_no_other_member_goes_online_at_once():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members", {}, online(OnlineReason.NO_MEMBERS), Step.ONLINE)])


def test_no_peer_reachable_goes_online_after_the_first_failed_attempt():
    """Scenario 36: every member registered but none answers."""
    core = play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
                 (1, "members", {1: "c2:1", 2: "c3:1"}, offer(S1), Step.OFFER),
                 (3001, "offer", (1, False), offer(S2), Step.OFFER),
                 (6001, "offer", (2, False), online(OnlineReason.NO_PEER_REACHABLE), Step.ONLINE)])
    assert core.status(6001)["unreachable"] == [1, 2] and core.attempt == 1


def test_an_unreachable_member_is_skipped_once_the_reachable_one_is_synced():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members", {1: "c2:1", 2: "c3:1"}, offer(S1), Step.OFFER),
          (2, "offer", (1, False), offer(S2), Step.OFFER),
          (3, "offer", (2, True), WAIT, Step.WAIT_TRANSFER),
          (4, "conn", {2}, pull(S2), Step.SYNC),
          (5, "pulled", (2, True), adopt(S2), Step.ADOPT),
          (6, "adopted", (2, True), online(OnlineReason.UNREACHABLE_SKIPPED), Step.ONLINE)])


def test_the_nameserver_down_is_retried_not_taken_for_no_peer():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (10, "members_down", None, WAIT, Step.RETRY_WAIT),
          (500, "tick", None, WAIT, Step.RETRY_WAIT),
          (1010, "tick", None, FETCH, Step.FETCH_MEMBERS),
          (1011, "members", {}, online(OnlineReason.NO_MEMBERS), Step.ONLINE)])


def test_connection_lost_mid_sync_fails_the_attempt_and_the_next_one_syncs_again():
    core = play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
                 (1, "members", {1: "c2:1"}, offer(S1), Step.OFFER),
                 (2, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
                 (3, "conn", {1}, pull(S1), Step.SYNC),
                 (4, "conn", set(), WAIT, Step.SYNC),  # dropped while the pull is on its way
                 (5, "pulled", (1, True), WAIT, Step.RETRY_WAIT),  # its answer is not adopted
                 (1005, "tick", None, FETCH, Step.FETCH_MEMBERS),
                 (1006, "members", {1: "c2:1"}, offer(S1), Step.OFFER),
                 (1007, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
                 (1100, "conn", {1}, pull(S1), Step.SYNC),
                 (1101, "pulled", (1, True), adopt(S1), Step.ADOPT),
                 (1102, "adopted", (1, True), online(OnlineReason.SYNCED), Step.ONLINE)])
    assert core.attempt == 2 and "CONNECTION_LOST" in core.last_failure


def test_slave_restarted_it_times_out_then_is_offered_again_at_its_new_address():
    """A restarted slave forgot the offer (the nameserver names no master): the wait times
    out, the next attempt reads its new registration and offers again."""
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members", {1: "c2:1"}, offer(S1), Step.OFFER),
          (2, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
          (9_000, "tick", None, WAIT, Step.WAIT_TRANSFER),
          (10_002, "tick", None, WAIT, Step.RETRY_WAIT),
          (11_002, "tick", None, FETCH, Step.FETCH_MEMBERS),
          (11_003, "members", {1: "c2:2"}, offer(Member(1, "c2:2")), Step.OFFER),
          (11_004, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
          (11_300, "conn", {1}, pull(Member(1, "c2:2")), Step.SYNC)])


def test_a_synced_member_that_dropped_before_the_end_is_synced_again():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members", {1: "c2:1", 2: "c3:1"}, offer(S1), Step.OFFER),
          (2, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
          (3, "conn", {1}, pull(S1), Step.SYNC),
          (4, "pulled", (1, True), adopt(S1), Step.ADOPT),
          (5, "adopted", (1, True), offer(S2), Step.OFFER),
          (6, "offer", (2, True), WAIT, Step.WAIT_TRANSFER),
          (7, "conn", {2}, pull(S2), Step.SYNC),  # member 1 left TRANSFER meanwhile
          (8, "pulled", (2, True), adopt(S2), Step.ADOPT),
          (9, "adopted", (2, True), WAIT, Step.RETRY_WAIT),
          (1009, "tick", None, FETCH, Step.FETCH_MEMBERS),
          (1010, "members", {1: "c2:1", 2: "c3:1"}, offer(S1), Step.OFFER),  # member 2 stays synced
          (1011, "offer", (1, False), online(OnlineReason.UNREACHABLE_SKIPPED), Step.ONLINE)])


@pytest.mark.parametrize("failure", ["pull", "adopt"])
def test_a_failed_pull_or_adoption_retries_from_that_member(failure):
    core = PreOnline(SETTINGS, 0)
    core.start(0)
    core.members_fetched({1: "c2:1"}, 0)
    core.connections(frozenset({1}), 0)
    assert core.offer_answered(1, True, 0) == pull(S1)
    if failure == "pull":
        assert core.pulled(1, False, 1, "DEADLINE_EXCEEDED") == WAIT
    else:
        core.pulled(1, True, 1)
        assert core.adopted(1, False, 2, "bad json") == WAIT
    assert core.step is Step.RETRY_WAIT and core.next_deadline_ms() in (1_001, 1_002)
    assert core.synced == set()


def test_max_attempts_gives_up_and_goes_online_with_its_own_tables():
    settings = Settings(0, 10_000, 1_000, max_attempts=2)
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members_down", None, WAIT, Step.RETRY_WAIT),
          (1001, "tick", None, FETCH, Step.FETCH_MEMBERS),
          (1002, "members_down", None, online(OnlineReason.GAVE_UP), Step.ONLINE)], settings)


def test_status_names_the_step_and_the_member_it_waits_on():
    core = PreOnline(SETTINGS, 100)
    core.start(100)
    core.members_fetched({1: "c2:1"}, 100)
    core.offer_answered(1, True, 150)
    status = core.status(400)
    assert (status["step"], status["waitingOn"], status["waitingOnAddress"], status["waitedMs"], status["attempt"]) == \
        ("WAIT_TRANSFER", 1, "c2:1", 250, 1)
    assert status["onlineReason"] is None and status["onlineAfterMs"] is None and core.next_deadline_ms() == 10_150


def test_a_master_in_pre_online_runs_no_special_service_acting_mode_or_not():
    from ha.acting.special_services import Reason, ReplicaFacts, decide_special_services

    for acting in (False, True):
        facts = ReplicaFacts(role="MASTER", own_id=0, acting_enabled=acting, handover_done=False, pre_online=True)
        decision = decide_special_services(facts, 0, 10_000)
        assert (decision.run, decision.reason) == (False, Reason.PRE_ONLINE)
    done = ReplicaFacts(role="MASTER", own_id=0, acting_enabled=True, handover_done=True, pre_online=False)
    assert decide_special_services(done, 0, 10_000).reason is Reason.MASTER


def test_a_driver_error_fails_the_attempt_and_it_is_retried():
    play([(0, "start", None, FETCH, Step.FETCH_MEMBERS),
          (1, "members", {1: "c2:1"}, offer(S1), Step.OFFER),
          (2, "offer", (1, True), WAIT, Step.WAIT_TRANSFER),
          (3, "conn", {1}, pull(S1), Step.SYNC),
          (4, "pulled", (1, True), adopt(S1), Step.ADOPT)])
    core = PreOnline(SETTINGS, 0)
    core.start(0)
    assert core.driver_failed("OSError: [Errno 28] No space left on device", 5) == WAIT
    assert core.step is Step.RETRY_WAIT and core.last_failure.startswith("DRIVER_ERROR: OSError")
    assert core.tick(1_005) == FETCH
