"""Read and write JSON the way RocketMQ's fastjson 1.2.83 does for its config files.

fastjson writes integer map keys unquoted (``{0:37960}``), which strict JSON parsers refuse,
sorts keys alphabetically and pretty-prints with tabs.  :func:`loads` accepts that dialect
(and strict JSON); :func:`dumps` produces it, so files we write are byte-compatible with
the ones Apache RocketMQ writes and reads.

This is a small hand-written scanner because no maintained library parses the dialect;
it is property-tested against ``json`` on strict input (tests/unit/test_fastjson.py).  Large
documents (a million consumer-offset keys) take a fast path with the same results: bare
integer keys are quoted by one regular-expression pass that steps over strings, then orjson
parses it (anything orjson refuses goes through the scanner, which names the position); strict
JSON, as RelayMQ's own state files are written, goes to orjson first, as it is; and a map whose
values are all integers is written in one join.
"""
from __future__ import annotations

import json
import re
from operator import itemgetter
from typing import Any, Callable

import orjson

__all__ = ["EntryTexts", "FastJsonError", "Formatted", "loads", "dumps", "formatted"]

MAX_DEPTH = 64


class FastJsonError(ValueError):
    """The text is not JSON in fastjson's dialect; the message names the position."""


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BARE_KEY = re.compile(r"-?\d+")
_WS = " \t\r\n"
# a whole string (stepped over), or a bare integer key after "{" or "," (quoted)
# a run of 19 digits may be an integer orjson turns into a float (past 64 bits): the scanner
# keeps it exact.  Looked for in the UTF-8 bytes with every digit made a 9 (C, ~memory speed):
# a regular expression took 945 ms over a 26 MB timer checkpoint
_DIGITS_TO_NINES = bytes.maketrans(b"012345678", b"999999999")
_LONG_DIGITS = b"9" * 19


def _has_long_digits(text: str) -> bool:
    return _LONG_DIGITS in text.encode("utf-8", "surrogatepass").translate(_DIGITS_TO_NINES)
_STRING_OR_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(?=\s*:)')


class _Scanner:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> FastJsonError:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return FastJsonError(f"{what} at line {line} column {col}")

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = self.text[self.pos] if self.pos < len(self.text) else "end of input"
            raise self.fail(f"expected {char!r}, found {found!r}")
        self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail("nesting too deep")
        char = self.peek()
        if char == "{":
            return self.object(depth + 1)
        if char == "[":
            return self.array(depth + 1)
        if char == '"':
            return self.string()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            raise self.fail("expected a value" if char else "unexpected end of input")
        self.pos = match.end()
        token = match.group()
        return int(token) if re.fullmatch(r"-?\d+", token) else float(token)

    def string(self) -> str:
        start = self.pos
        decoder = json.JSONDecoder()
        try:
            result, end = decoder.raw_decode(self.text, start)
        except json.JSONDecodeError as exc:
            raise self.fail(f"bad string ({exc.msg})") from None
        if not isinstance(result, str):
            raise self.fail("expected a string")
        self.pos = end
        return result

    def key(self) -> str:
        if self.peek() == '"':
            return self.string()
        match = _BARE_KEY.match(self.text, self.pos)
        if not match:
            raise self.fail("expected an object key")
        self.pos = match.end()
        return match.group()

    def object(self, depth: int) -> dict[str, Any]:
        self.expect("{")
        result: dict[str, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            key = self.key()
            self.expect(":")
            result[key] = self.value(depth)
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return result

    def array(self, depth: int) -> list[Any]:
        self.expect("[")
        result: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth))
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return result


def loads(text: str | bytes) -> Any:
    """Parse fastjson-dialect JSON.  Integer keys come back as strings, as ``json`` does."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FastJsonError(f"not UTF-8 (byte {exc.start})") from None
    if not _has_long_digits(text):
        try:  # strict JSON (RelayMQ's own state files) as it is: no pass over its strings
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        try:
            return orjson.loads(_STRING_OR_BARE_KEY.sub(_quote_key, text))
        except orjson.JSONDecodeError:
            pass  # the scanner says where
    scanner = _Scanner(text)
    result = scanner.value(0)
    if scanner.peek():
        raise scanner.fail("trailing data")
    return result


def _quote_key(match: re.Match) -> str:
    return match.group(0) if match.group(2) is None else f'{match.group(1)}"{match.group(2)}"'


def _dump(value: Any, indent: int, out: list[str]) -> None:
    pad = "\t" * (indent + 1)
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        if all(type(key) is str for key in value):  # sorted by the key alone, in C
            items = sorted(value.items(), key=_first)
        else:
            items = sorted(value.items(), key=lambda item: _sort_key(item[0]))
        texts = [_scalar(item, indent + 1) for _, item in items]
        if None not in texts:  # scalars only (a queue -> offset map, a config entry): one join
            out.append("{\n" + ",\n".join(f"{pad}{_key(key)}:{text}" for (key, _), text in zip(items, texts))
                       + "\n" + "\t" * indent + "}")
            return
        out.append("{\n")
        last = len(items) - 1
        for index, ((key, item), text) in enumerate(zip(items, texts)):
            out.append(f"{pad}{_key(key)}:{text}" if text is not None else f"{pad}{_key(key)}:")
            if text is None:
                _dump(item, indent + 1, out)
            out.append(",\n" if index < last else "\n")
        out.append("\t" * indent + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        texts = [_scalar(item, indent + 1) for item in value]
        if None not in texts:  # scalars only: one join
            out.append("[\n" + ",\n".join(pad + text for text in texts) + "\n" + "\t" * indent + "]")
            return
        out.append("[\n")
        last = len(value) - 1
        for index, (item, text) in enumerate(zip(value, texts)):
            out.append(pad)
            if text is None:
                _dump(item, indent + 1, out)
            else:
                out.append(text)
            out.append(",\n" if index < last else "\n")
        out.append("\t" * indent + "]")
    elif type(value) is Formatted:  # written for another depth: written again
        _dump(value.value, indent, out)
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def _scalar(value: Any, depth: int) -> str | None:
    """A string, integer, boolean, null, empty container or :class:`Formatted` of ``depth`` as
    JSON text (None for anything else: floats and containers go the general way).  Strings go through orjson, whose text for a valid str
    is json.dumps(ensure_ascii=False)'s (tests/unit/test_fastjson.py holds them equal): the
    writer spent most of its time in json.dumps, 295 ms for a topics.json of 10,000 topics."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is Formatted:
        return value.text if value.depth == depth else None
    if not value and (kind is dict or kind is list):
        return "{}" if kind is dict else "[]"
    return None


def _string(text: str) -> str:
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:  # a lone surrogate: json.dumps writes it as it is
        return json.dumps(text, ensure_ascii=False)


def _sort_key(key: Any) -> tuple[int, Any]:
    # fastjson sorts an integer-keyed map by number, a string-keyed one alphabetically
    if isinstance(key, int) and not isinstance(key, bool):
        return (0, key)
    return (1, str(key))


def _key(key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    if type(key) is not str:
        return _string(str(key))
    text = _KEY_TEXTS.get(key)
    if text is None:
        text = _string(key)
        if len(_KEY_TEXTS) >= 4096:
            _KEY_TEXTS.clear()
        _KEY_TEXTS[key] = text
    return text


_KEY_TEXTS: dict[str, str] = {}  # field names repeat in every entry of a table: their JSON text, kept
_first = itemgetter(0)


def dumps(value: Any) -> str:
    """fastjson's pretty print: tabs, sorted keys, integer keys unquoted (pass them as int).
    A :class:`Formatted` value placed where it was written for is copied as it is."""
    out: list[str] = []
    _dump(value, 0, out)
    return "".join(out)


class Formatted:
    """A value already written by :func:`formatted` for one depth of a document: a table keeps
    its entries' texts, and rewriting the file after one change writes one entry (topics.json
    of 10,000 topics: every entry written again cost the loop 90 ms per topic created)."""

    __slots__ = ("text", "depth", "value")

    def __init__(self, text: str, depth: int, value: Any):
        self.text, self.depth, self.value = text, depth, value


def formatted(value: Any, depth: int) -> Formatted:
    """``value`` written as :func:`dumps` writes it ``depth`` levels deep."""
    out: list[str] = []
    _dump(value, depth, out)
    return Formatted("".join(out), depth, value)


class EntryTexts:
    """The entries of a table of immutable values, each written once for ``depth`` and kept per
    value object (the object held, so its id stays its own); at most ``limit`` are kept."""

    def __init__(self, depth: int, limit: int = 200_000):
        self.depth, self.limit = depth, limit
        self._kept: dict[int, tuple[Any, Formatted]] = {}

    def of(self, entry: Any, document: Callable[[Any], Any]) -> Formatted:
        """``entry``'s text, ``document(entry)`` written the first time."""
        kept = self._kept.get(id(entry))
        if kept is not None and kept[0] is entry:
            return kept[1]
        text = formatted(document(entry), self.depth)
        if len(self._kept) >= self.limit:
            self._kept.clear()
        self._kept[id(entry)] = (entry, text)
        return text
