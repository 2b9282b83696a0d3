"""Reading request bodies by hand: size limits, strict I-JSON, NDJSON streams in batches."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, TypeAdapter, ValidationError

from app.digest.strictjson import InvalidJSON, parse_lines, parse_strict
from app.domain.errors import (
    PayloadTooLarge,
    ProblemError,
    RequestTimeout,
    ValidationFailed,
    validation_error,
)

ModelT = TypeVar("ModelT", bound=BaseModel)
NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-seq")


def media_type_of(content_type: str | None) -> str:
    """A Content-Type's media type without parameters, lower case."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def media_type(request: Request) -> str:
    """The request's media type without parameters, lower case."""
    return media_type_of(request.headers.get("content-type"))


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body passes the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(data: bytes, base: tuple[str | int, ...]) -> Any:
    """Strict I-JSON parse whose failure is a 422 naming the location."""
    try:
        return parse_strict(data, base)
    except InvalidJSON as exc:
        raise validation_error(exc.loc, exc.msg) from None


# The tags of the discriminated aggregation union, which Pydantic puts in an error's location
# ("aggregation", "pass_rate", "threshold"): a client sent no such field.
_UNION_TAGS = {"aggregation": {"all_pass", "pass_rate", "mean", "min"}}


def problem_errors(errors: Sequence[Any], base: tuple[str | int, ...] = ()) -> list[dict[str, Any]]:
    """Pydantic's errors as a problem's `errors`: each location as the client sent it, each
    message without Pydantic's "Value error, " prefix."""
    cleaned = []
    for error in errors:
        loc: list[str | int] = [*base]
        for part in error["loc"]:
            if not (loc and part in _UNION_TAGS.get(str(loc[-1]), ())):
                loc.append(part)
        cleaned.append({"loc": loc, "msg": str(error["msg"]).removeprefix("Value error, ")})
    return cleaned


def validation_failed(errors: list[dict[str, Any]]) -> ValidationFailed:
    """A 422 whose detail names the first refused location."""
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(part) for part in first["loc"])
    return ValidationFailed(f"{where}: {first['msg']}", errors=errors)


def validate(model: type[ModelT], data: Any, base: tuple[str | int, ...] = ("body",)) -> ModelT:
    """Validate parsed JSON against a strict model; 422 listing every error."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        raise validation_failed(problem_errors(errors, base)) from None


@functools.cache
def _lines_adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def validate_lines(model: type[ModelT], numbers: Sequence[int], values: list[Any]) -> list[ModelT]:
    """A batch of NDJSON values validated as `model` in one call; a 422 names each error's
    line (`line N.field`), as validating line by line would."""
    try:
        found: list[ModelT] = _lines_adapter(model).validate_python(values)
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False, include_input=False):
            index, *rest = error["loc"]
            located = {**error, "loc": tuple(rest)}
            errors += problem_errors([located], (f"line {numbers[int(index)]}",))
        raise validation_failed(errors) from None
    return found


# A batch of NDJSON lines or values with their line numbers (a range when none was blank).
Numbered = tuple[Sequence[int], list[Any]]


def _line_too_long(number: int, line_limit: int) -> PayloadTooLarge:
    """The 413 of NDJSON line `number`, longer than `line_limit` bytes."""
    return PayloadTooLarge(f"line {number} passes the limit of {line_limit} bytes", index=number)


def _numbered_lines(
    lines: list[bytes], number: int, line_limit: int
) -> tuple[Sequence[int], list[bytes]]:
    """The non-blank lines of `lines` (the first is line `number + 1`) with their numbers."""
    if (
        lines
        and max(map(len, lines)) <= line_limit
        and not (b"" in lines or any(map(bytes.isspace, lines)))
    ):
        # The common chunk: no line blank or too long, so the numbers run on (checked in C).
        return range(number + 1, number + 1 + len(lines)), lines
    numbers: list[int] = []
    kept: list[bytes] = []
    for line in lines:
        number += 1
        if len(line) > line_limit:
            raise _line_too_long(number, line_limit)
        if line and not line.isspace():
            numbers.append(number)
            kept.append(line)
    return numbers, kept


@dataclass(slots=True)
class StreamPace:
    """What an NDJSON stream must keep to: a complete line at least every `line_seconds`
    (a byte now and then is not progress), and its end within `total_seconds`. A stream that
    falls behind is answered 408 at that moment, and gives back what it held. `interrupt`
    ends the wait for the body at once with another error (the database ended the session
    the stream was being written on)."""

    line_seconds: float
    total_seconds: float
    waiting: asyncio.Timeout | None = None
    interruption: ProblemError | None = None

    def interrupt(self, error: ProblemError) -> None:
        """Stop waiting for the body now; the stream raises `error`."""
        self.interruption = error
        if self.waiting is not None and not self.waiting.expired():
            self.waiting.reschedule(asyncio.get_running_loop().time())


def _behind(pace: StreamPace, waited_for_line: bool) -> ProblemError:
    if pace.interruption is not None:
        return pace.interruption
    if waited_for_line:
        return RequestTimeout(
            f"no complete line arrived for {pace.line_seconds:g} s; an NDJSON stream must "
            "bring a whole line at least that often (send cases as they are scored, or as a "
            "JSON batch)"
        )
    return RequestTimeout(
        f"the stream did not end within {pace.total_seconds:g} s; send the rest in another "
        "request (identical re-sends are accepted)"
    )


async def _paced(request: Request, pace: StreamPace | None) -> AsyncIterator[bytes]:
    """The body's chunks, refused 408 when a complete line or the stream's end does not come
    in time (or with the pace's interruption, once interrupted)."""
    if pace is None:
        async for chunk in request.stream():
            yield chunk
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + pace.total_seconds
    line_due = loop.time() + pace.line_seconds
    chunks = request.stream().__aiter__()
    while True:
        if pace.interruption is not None:
            raise pace.interruption
        try:
            async with asyncio.timeout_at(min(line_due, end)) as pace.waiting:
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise _behind(pace, line_due < end) from None
        finally:
            pace.waiting = None
        if b"\n" in chunk:
            line_due = loop.time() + pace.line_seconds
        yield chunk


async def ndjson_line_batches(
    request: Request, line_limit: int, pace: StreamPace | None = None
) -> AsyncIterator[tuple[Sequence[int], list[bytes]]]:
    """Numbered non-blank lines of an NDJSON stream, a batch per received chunk (never whole),
    kept to `pace` when one is given."""
    pending: list[bytes] = []
    pending_size = 0
    number = 0
    async for chunk in _paced(request, pace):
        if b"\n" not in chunk:
            # A long line arriving in pieces: keep the pieces, join once its end comes.
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size > line_limit:
                raise _line_too_long(number + 1, line_limit)
            continue
        lines = (b"".join(pending) + chunk).split(b"\n") if pending else chunk.split(b"\n")
        rest = lines.pop()
        pending, pending_size = ([rest], len(rest)) if rest else ([], 0)
        numbers, kept = _numbered_lines(lines, number, line_limit)
        number += len(lines)
        if kept:
            yield numbers, kept
        if pending_size > line_limit:
            raise _line_too_long(number + 1, line_limit)
    last = b"".join(pending)
    if last and not last.isspace():
        yield [number + 1], [last]


# Lines parsed and handed on at a time: about a millisecond of work between two turns of the
# event loop.
VALUE_BATCH_LINES = 512


async def ndjson_line_chunks(
    request: Request, line_limit: int, pace: StreamPace | None = None
) -> AsyncIterator[Numbered]:
    """Numbered non-blank NDJSON lines in batches of at most VALUE_BATCH_LINES, a turn of the
    event loop after each."""
    async for numbers, received in ndjson_line_batches(request, line_limit, pace):
        for start in range(0, len(received), VALUE_BATCH_LINES):
            yield (
                numbers[start : start + VALUE_BATCH_LINES],
                received[start : start + VALUE_BATCH_LINES],
            )
            # A body that arrived whole would otherwise be parsed and checked without a pause:
            # the event loop then feeds the database a chunk under way between batches.
            await asyncio.sleep(0)


async def ndjson_value_batches(request: Request, line_limit: int) -> AsyncIterator[Numbered]:
    """Strictly parsed NDJSON values with their line numbers, in batches."""
    async for numbers, lines in ndjson_line_chunks(request, line_limit):
        yield numbers, parse_lines(numbers, lines)


async def ndjson_values(request: Request, line_limit: int) -> AsyncIterator[tuple[int, Any]]:
    """Strictly parsed NDJSON values with their line numbers, one at a time."""
    async for numbers, values in ndjson_value_batches(request, line_limit):
        for item in zip(numbers, values, strict=True):
            yield item
