"""bench/bench_reassign.py's ``--sizes``: binary units, and a bad list refused naming the part."""
from __future__ import annotations

import argparse

import pytest

from bench.bench_reassign import parse_sizes


def test_sizes_are_binary_units_in_the_order_given():
    assert parse_sizes("100M,1G,10G") == [("100M", 100 << 20), ("1G", 1 << 30), ("10G", 10 << 30)]
    assert parse_sizes(" 1024k , 2GiB,1tb") == [("1024k", 1 << 20), ("2GiB", 2 << 30), ("1tb", 1 << 40)]


@pytest.mark.parametrize("text, says", [("100", "'100' is not a size"), ("1.5G", "'1.5G' is not a size"),
                                         ("100M,", "'' is not a size"), ("-1G", "'-1G'"),
                                         ("512K", "at least 1M"), ("2T", "at most 1T"),
                                         ("1G,1024M", "the same size twice")])
def test_a_bad_size_is_refused_naming_it(text: str, says: str):
    with pytest.raises(argparse.ArgumentTypeError, match=says.replace(".", r"\.")):
        parse_sizes(text)
