"""Consumer filters: TAG expressions and RocketMQ's SQL92 subset over message properties.

Rules:

* TAG: ``*`` or empty matches every message; else ``a || b`` matches a message whose tag is
  one of them.
* SQL92 (RocketMQ's grammar): comparisons ``= <> > >= < <=``, ``[NOT] BETWEEN a AND b``,
  ``[NOT] IN ('a', ...)``, ``IS [NOT] NULL``, ``[NOT] CONTAINS | STARTSWITH | ENDSWITH``,
  ``AND OR NOT`` and parentheses; literals: 'strings' ('' escapes a quote), numbers, TRUE,
  FALSE, NULL; keywords in any case.  Names are the message's user properties, and ``TAGS``
  its tag.  Property values are strings: an ordering comparison or BETWEEN reads both sides as
  numbers, ``=`` against a number literal too; a value that is no number never matches.
* Three-valued logic as SQL's: a comparison with a missing property is unknown, NOT unknown
  is unknown, and a message matches only when the whole expression is TRUE.
* A bad expression is :class:`FilterSyntaxError` naming the position; the driver answers
  ILLEGAL_FILTER_EXPRESSION.  Compiled filters are cached by expression.
* Parsing uses lark (LALR) with the grammar below; evaluation is ours.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Mapping

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput

_GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction | disjunction _OR conjunction -> or_
?conjunction: negation | conjunction _AND negation -> and_
?negation: _NOT negation -> not_ | predicate
?predicate: operand COMPARATOR operand -> compare
    | operand _IS _NULL -> is_null
    | operand _IS _NOT _NULL -> is_not_null
    | operand _BETWEEN operand _AND operand -> between
    | operand _NOT _BETWEEN operand _AND operand -> not_between
    | operand _IN "(" literal ("," literal)* ")" -> in_
    | operand _NOT _IN "(" literal ("," literal)* ")" -> not_in
    | operand TEXT_OP operand -> text
    | operand _NOT TEXT_OP operand -> not_text
    | "(" disjunction ")"
    | boolean
?operand: NAME -> name | literal
?literal: STRING -> string | NUMBER -> number | boolean | _NULL -> null
boolean: TRUE | FALSE
COMPARATOR: "=" | "<>" | ">=" | "<=" | ">" | "<"
TEXT_OP.2: /(contains|startswith|endswith)\b/i
TRUE.2: /true\b/i
FALSE.2: /false\b/i
_OR.2: /or\b/i
_AND.2: /and\b/i
_NOT.2: /not\b/i
_IS.2: /is\b/i
_NULL.2: /null\b/i
_BETWEEN.2: /between\b/i
_IN.2: /in\b/i
NAME: /[A-Za-z_$][A-Za-z0-9_$.]*/
STRING: /'(?:[^']|'')*'/
NUMBER: /[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/
%ignore /[ \t\r\n]+/
"""
_PARSER = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)

Properties = Mapping[str, str]
Predicate = Callable[[Properties], bool | None]   # None: unknown
TAGS = "TAGS"


class FilterSyntaxError(ValueError):
    """A filter expression that does not parse or cannot be evaluated as written."""


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


_ORDER = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    if op in _ORDER:
        a, b = _number(left), _number(right)
        return None if a is None or b is None else _ORDER[op](a, b)
    if isinstance(left, bool) or isinstance(right, bool):
        a, b = str(left).lower(), str(right).lower()
    elif isinstance(left, str) and isinstance(right, str):
        a, b = left, right
    else:
        a, b = _number(left), _number(right)
        if a is None or b is None:
            return None
    return (a == b) if op == "=" else (a != b)


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


_TEXT = {"contains": lambda s, t: t in s, "startswith": str.startswith, "endswith": str.endswith}


@v_args(inline=True)
class _Compile(Transformer):
    """Tree -> closures: operands are ``props -> value``, predicates ``props -> bool | None``."""

    def name(self, token: Token):
        key = str(token)
        return lambda props: props.get(key)

    def string(self, token: Token):
        text = str(token)[1:-1].replace("''", "'")
        return lambda props: text

    def number(self, token: Token):
        value = _number(str(token))
        return lambda props: value

    def null(self):
        return lambda props: None

    def boolean(self, token: Token):
        value = token.type == "TRUE"
        return lambda props: value

    def compare(self, left, op: Token, right):
        op = str(op)
        return lambda props: _compare(op, left(props), right(props))

    def is_null(self, operand):
        return lambda props: operand(props) is None

    def is_not_null(self, operand):
        return lambda props: operand(props) is not None

    def between(self, operand, low, high):
        def check(props):
            value = operand(props)
            return _and([_compare(">=", value, low(props)), _compare("<=", value, high(props))])
        return check

    def not_between(self, operand, low, high):
        inner = self.between(operand, low, high)
        return lambda props: _not(inner(props))

    def in_(self, operand, *choices):
        def check(props):
            value = operand(props)
            return None if value is None else _or([_compare("=", value, c(props)) for c in choices])
        return check

    def not_in(self, operand, *choices):
        inner = self.in_(operand, *choices)
        return lambda props: _not(inner(props))

    def text(self, left, op: Token, right):
        test = _TEXT[str(op).lower()]

        def check(props):
            a, b = left(props), right(props)
            return None if not isinstance(a, str) or not isinstance(b, str) else test(a, b)
        return check

    def not_text(self, left, op: Token, right):
        inner = self.text(left, op, right)
        return lambda props: _not(inner(props))

    def not_(self, inner):
        return lambda props: _not(inner(props))

    def and_(self, left, right):
        return lambda props: _and([left(props), right(props)])

    def or_(self, left, right):
        return lambda props: _or([left(props), right(props)])


def _and(values: list[bool | None]) -> bool | None:
    if False in values:
        return False
    return None if None in values else True


def _or(values: list[bool | None]) -> bool | None:
    if True in values:
        return True
    return None if None in values else False


@functools.lru_cache(maxsize=1024)
def compile_sql(expression: str) -> Predicate:
    """The SQL92 expression as a predicate over properties (TAGS included)."""
    if not expression.strip():
        raise FilterSyntaxError("empty SQL92 expression")
    try:
        compiled = _Compile().transform(_PARSER.parse(expression))
    except UnexpectedInput as failure:
        what = "character" if isinstance(failure, UnexpectedCharacters) else "token"
        raise FilterSyntaxError(f"unexpected {what} at column {failure.column} of {expression!r}") from None
    except LarkError as failure:
        raise FilterSyntaxError(f"bad SQL92 expression {expression!r}: {failure}") from None
    if not callable(compiled) or isinstance(compiled, Token):
        raise FilterSyntaxError(f"{expression!r} is not a condition")
    return compiled


def sql_matches(predicate: Predicate, tag: str | None, properties: Properties) -> bool:
    view = properties if tag is None else _WithTags(properties, tag)
    return predicate(view) is True


class _WithTags(Mapping):
    """The message's properties with its tag as ``TAGS`` (no copy of the properties)."""

    __slots__ = ("_props", "_tag")

    def __init__(self, props: Properties, tag: str):
        self._props, self._tag = props, tag

    def __getitem__(self, key: str) -> str:
        return self._tag if key == TAGS else self._props[key]

    def get(self, key: str, default=None):
        return self._tag if key == TAGS else self._props.get(key, default)

    def __iter__(self):
        yield TAGS
        yield from (k for k in self._props if k != TAGS)

    def __len__(self) -> int:
        return len(self._props) + (TAGS not in self._props)


def parse_tags(expression: str) -> frozenset[str] | None:
    """A TAG expression: None (every message) or the set of tags that match."""
    text = expression.strip()
    if text in ("", "*"):
        return None
    return frozenset(tag.strip() for tag in text.split("||") if tag.strip())


class MessageFilter:
    """What a receive delivers: every message, a TAG set, or an SQL92 predicate."""

    __slots__ = ("tags", "sql")

    def __init__(self, tags: frozenset[str] | None = None, sql: Predicate | None = None):
        self.tags, self.sql = tags, sql

    @property
    def everything(self) -> bool:
        return self.tags is None and self.sql is None

    def matches(self, tag: str | None, user_properties: Properties) -> bool:
        if self.sql is not None:
            return sql_matches(self.sql, tag, user_properties)
        return self.tags is None or (tag or "") in self.tags


EVERYTHING = MessageFilter()


def compile_filter(sql: bool, expression: str) -> MessageFilter:
    """A receive's filter; :class:`FilterSyntaxError` for a bad SQL92 expression."""
    if sql:
        return MessageFilter(sql=compile_sql(expression))
    tags = parse_tags(expression)
    return EVERYTHING if tags is None else MessageFilter(tags=tags)
