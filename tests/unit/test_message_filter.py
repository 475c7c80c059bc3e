"""metadata.message_filter: TAG expressions and RocketMQ's SQL92 subset, with SQL's three-valued logic."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from metadata.message_filter import FilterSyntaxError, compile_filter, compile_sql, sql_matches

PROPS = {"a": "10", "price": "3.5", "region": "eu-west", "flag": "true", "quote": "it's", "neg": "-2", "word": "abc"}


@pytest.mark.parametrize("expression, expected", [
    ("a > 5", True), ("a > 50", False), ("a >= 10 AND a <= 10", True), ("a < 10.5", True), ("a = 10", True),
    ("a = 10.0", True), ("a <> 10", False), ("a = '10'", True), ("a = '010'", False),
    ("price BETWEEN 3 AND 4", True), ("price NOT BETWEEN 3 AND 4", False), ("neg BETWEEN -3 AND -1", True),
    ("region IN ('us', 'eu-west')", True), ("region NOT IN ('us', 'eu-west')", False), ("a IN (10, 11)", True),
    ("region = 'eu-west'", True), ("region <> 'eu'", True), ("quote = 'it''s'", True),
    ("missing IS NULL", True), ("missing IS NOT NULL", False), ("a IS NOT NULL", True),
    ("flag = TRUE", True), ("flag = FALSE", False), ("TRUE", True), ("FALSE", False),
    ("region CONTAINS 'west'", True), ("region NOT CONTAINS 'west'", False), ("region STARTSWITH 'eu'", True),
    ("region ENDSWITH 'east'", False), ("region NOT ENDSWITH 'east'", True),
    ("TAGS = 'TagA'", True), ("TAGS IN ('TagB')", False),
    ("a > 5 and region = 'eu-west' or missing = 1", True), ("(a > 50 OR a < 5) AND TRUE", False),
    ("word > 1", False),                 # not a number: an ordering comparison never matches
    ("word = 1", False), ("a = 'x' OR a > 5", True),
    # three-valued logic: a missing property makes a comparison unknown, NOT unknown is unknown
    ("missing = 1", False), ("NOT missing = 1", False), ("missing <> 1", False), ("missing = 1 OR a = 10", True),
    ("NOT (missing = 1 AND a = 99)", True),  # unknown AND false is false: NOT false is true
    ("missing IN ('x')", False), ("missing NOT IN ('x')", False),
    ("andrew IS NULL", True), ("a = 10 aNd TAGS = 'TagA' oR fAlSe", True),  # keywords in any case
])
def test_sql92_semantics(expression, expected):
    assert sql_matches(compile_sql(expression), "TagA", PROPS) is expected


@pytest.mark.parametrize("expression", ["", "   ", "a >", "a = ", "'x'", "a ! 1", "a IN ()", "a", "and", "((a = 1)",
                                        "a = 1 AND", "a BETWEEN 1", "a IS 1", "a = 'open", "a = 1 b = 2", "a == 1"])
def test_bad_sql92_names_what_is_wrong(expression):
    with pytest.raises(FilterSyntaxError) as failure:
        compile_sql(expression)
    assert "empty" in str(failure.value) or "column" in str(failure.value) or "condition" in str(failure.value)


@given(st.text(max_size=40))
def test_any_text_compiles_or_is_a_syntax_error(text):
    try:
        predicate = compile_sql(text)
    except FilterSyntaxError:
        return
    assert sql_matches(predicate, None, PROPS) in (True, False)


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6), st.sampled_from(["=", "<>", ">", ">=", "<", "<="]))
def test_numeric_comparisons_agree_with_python(value, literal, op):
    python = {"=": value == literal, "<>": value != literal, ">": value > literal, ">=": value >= literal,
              "<": value < literal, "<=": value <= literal}[op]
    assert sql_matches(compile_sql(f"x {op} {literal}"), None, {"x": str(value)}) is python


def test_tag_expressions():
    assert compile_filter(False, "*").everything and compile_filter(False, " ").everything
    both = compile_filter(False, "a || b")
    assert both.matches("a", {}) and both.matches("b", {}) and not both.matches("c", {}) and not both.matches(None, {})
    sql = compile_filter(True, "TAGS = 'a'")
    assert not sql.everything and sql.matches("a", {}) and not sql.matches(None, {})
