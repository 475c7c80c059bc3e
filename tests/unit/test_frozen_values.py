"""metadata.frozen_values.quick_init: the same frozen value, made with one __dict__ update."""
from __future__ import annotations

import dataclasses

import pytest

from metadata.frozen_values import quick_init
from scheduler.pop.records import InFlight


@dataclasses.dataclass(frozen=True)
class Plain:
    name: str
    count: int
    tag: str = "none"
    extra: tuple = ()


Quick = quick_init(dataclasses.make_dataclass("Quick", [("name", str), ("count", int),
                                                         ("tag", str, dataclasses.field(default="none")),
                                                         ("extra", tuple, dataclasses.field(default=()))],
                                              frozen=True))


@pytest.mark.parametrize("args, kwargs", [(("a", 1), {}), (("a", 1, "t"), {}), (("a",), {"count": 2, "extra": (1,)}),
                                          ((), {"name": "b", "count": 3, "tag": "x"})])
def test_the_value_is_the_one_the_generated_init_makes(args, kwargs):
    plain, quick = Plain(*args, **kwargs), Quick(*args, **kwargs)
    assert dataclasses.astuple(plain) == dataclasses.astuple(quick)
    assert repr(quick).replace("Quick", "Plain") == repr(plain)
    assert quick == Quick(*args, **kwargs) and hash(quick) == hash(Quick(*args, **kwargs))
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.count = 9  # type: ignore[misc]


def test_missing_and_unknown_arguments_fail_as_before():
    with pytest.raises(TypeError):
        Quick("a")
    with pytest.raises(TypeError):
        Quick("a", 1, colour="red")


def test_replace_and_the_hot_classes_keep_working():
    entry = InFlight(1, 2, 3, 4, 5, 6)
    assert (entry.fifo, entry.message_group) == (False, "")
    assert dataclasses.replace(entry, attempt=4) == InFlight(1, 2, 4, 4, 5, 6)
    assert InFlight.__init__.__qualname__ == "InFlight.__init__"
    # one __dict__ update, not an object.__setattr__ per field
    assert "update" in InFlight.__init__.__code__.co_names and "__setattr__" not in InFlight.__init__.__code__.co_names
    assert "__setattr__" in Plain.__init__.__code__.co_names


def test_classes_it_cannot_keep_the_same_are_refused():
    @dataclasses.dataclass(frozen=True)
    class WithPost:
        a: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True)
    class WithFactory:
        a: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class Mutable:
        a: int

    for cls in (WithPost, WithFactory, Mutable):
        with pytest.raises(TypeError):
            quick_init(cls)
