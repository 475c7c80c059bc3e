"""Frozen value objects that are cheap to make: for the ones a receive or an ack makes per message.

Why: a frozen dataclass's generated ``__init__`` sets each field with its own
``object.__setattr__`` call (the class's own ``__setattr__`` refuses).  An 8-field value
cost 0.98 us to make on the reference machine, and a receive and its ack made half a dozen
per message (in-flight entries, deliveries, receipt handles, consume-queue entries): about
9% of the receive path's Python (py-spy over ``bench/send_path.py --case receive``).

Rule: :func:`quick_init` goes on top of ``@dataclass(frozen=True)`` and gives the class an
``__init__`` with the same signature that fills the instance's ``__dict__`` in one
``update`` (0.46 us for the same value).  The value is the same: frozen, equal, hashed and
printed as before.  Only plain fields qualify: a class with ``__post_init__``, a
``default_factory``, a field left out of ``__init__`` or ``__slots__`` is refused at import.
"""
from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
        raise TypeError(f"{cls.__name__}: quick_init is for frozen dataclasses")
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: quick_init cannot keep __post_init__ or __slots__")
    fields = dataclasses.fields(cls)
    defaults: dict[str, object] = {}
    parameters = []
    for item in fields:
        if not item.init or item.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{item.name}: quick_init takes plain fields only")
        if item.default is dataclasses.MISSING:
            parameters.append(item.name)
        else:
            defaults[f"_default_{item.name}"] = item.default
            parameters.append(f"{item.name}=_default_{item.name}")
    names = [item.name for item in fields]
    source = (f"def __init__(self, {', '.join(parameters)}):\n"
              f"    self.__dict__.update({', '.join(f'{name}={name}' for name in names)})\n")
    namespace: dict[str, object] = {}
    exec(source, dict(defaults), namespace)  # noqa: S102 - built from the dataclass's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init
    return cls
