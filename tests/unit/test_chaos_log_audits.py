"""The chaos harness's log audits (bench/chaos.py): the controllers' elections
(``Checks.controller_logs``) against the lines the controller state machine really writes, one
master per (group, epoch) over every member's applied elections, restarts' replays included;
and the tracebacks the cluster's processes logged (``Checks.log_tracebacks``)."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from bench.chaos import Checks
from ha.controller.events import ApplyBrokerIdEvent, ElectMasterEvent, encode_event
from ha.controller.liveness import BrokerLiveness
from ha.raft.types import Entry
from services.controller.machine import ControllerMachine

B = "broker-a"
ROOT = Path(__file__).resolve().parents[2]


def applied(caplog, events) -> str:
    """The log a controller member writes while applying ``events`` (indexes from 1)."""
    machine = ControllerMachine(BrokerLiveness(1000, 16), lambda: 0, lambda name, view: None)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="services.controller.machine"):
        for index, event in enumerate(events, 1):
            machine.apply_entry(Entry(1, index, encode_event(event)))
    return "\n".join(record.getMessage() for record in caplog.records) + "\n"


def registered(*ids: int) -> list:
    return [ApplyBrokerIdEvent("c", B, f"10.0.0.{i}:10911", i, f"code-{i}") for i in ids]


def audit(tmp_path, *logs: str) -> Checks:
    paths = []
    for number, text in enumerate(logs):
        paths.append(tmp_path / f"controller-n{number}.log")
        paths[-1].write_text(text)
    checks = Checks()
    checks.controller_logs(paths)
    return checks


def test_members_and_replays_that_agree_are_clean(tmp_path, caplog):
    history = [*registered(1, 2), ElectMasterEvent(True, B, 1), ElectMasterEvent(False, B),
               ElectMasterEvent(True, B, 2)]
    one = applied(caplog, history)
    assert "broker-a master 1 epoch 1" in one and "broker-a master 2 epoch 3" in one
    checks = audit(tmp_path, one, one + one)  # a second member, restarted once: the log replayed
    assert checks.violations == [] and checks.elections_logged == 2


def test_two_masters_in_one_epoch_across_members_is_a_violation(tmp_path, caplog):
    first = applied(caplog, [*registered(1, 2), ElectMasterEvent(True, B, 1)])
    second = applied(caplog, [*registered(1, 2), ElectMasterEvent(True, B, 2)])
    checks = audit(tmp_path, first, second)
    assert checks.violations == ["broker-a epoch 1: the controllers' logs elect masters [1, 2]"]


def test_an_election_without_a_master_is_not_logged_as_one(tmp_path, caplog):
    text = applied(caplog, [*registered(1), ElectMasterEvent(False, B)])
    assert audit(tmp_path, text).elections_logged == 0


def test_tracebacks_are_counted_once_per_log_record_by_its_first_line(tmp_path):
    log = tmp_path / "container.log"
    log.write_text(
        "2026-11-27 07:32:54,257 ERROR scheduler.periodic: broker broker-a: periodic task revive failed\n"
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 1\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  File \"y.py\", line 2, in g\nRuntimeError: 2\n"
        "2026-11-27 07:32:55,000 INFO services.ha.replica: broker-a: now slave (epoch 26)\n"
        "2026-11-27 07:33:00,100 ERROR scheduler.periodic: broker broker-a: periodic task revive failed\n"
        "Traceback (most recent call last):\nKeyError: 3\n")
    checks = Checks()
    checks.log_tracebacks([log, tmp_path / "absent.log"])
    assert checks.tracebacks == {"ERROR scheduler.periodic: broker broker-a: periodic task revive failed": 2}


@pytest.mark.parametrize("flags, says", [(["--fifo-groups", "0"], "--fifo-groups must be at least 1"),
                                         (["--fifo-rate", "0"], "--fifo-rate must be at least 1"),
                                         (["--disk-mb", "10"], "--disk-mb must be at least 64"),
                                         (["--kinds", "nope"], "unknown fault kinds ['nope']")])
def test_bad_harness_flags_are_refused_before_anything_starts(flags, says):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "chaos.py"), *flags], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr
