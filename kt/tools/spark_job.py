"""What the Spark commands (`kt analyze ...`, `kt export`) share: their options, the
scan they read, the session a job runs in, and how a result is written or shown.

The scan and output options reach a command as one `SparkArgs` (`spark_args`) and
one `OutputArgs` (`output`) instead of a dozen parameters. PySpark is an optional
extra: without it a command stops with one error line and exit 1.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kt.tools.console import emit_json, fail, render_table, usage_error

if TYPE_CHECKING:
    from kt.spark.jobs import Scan

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


def _apply(func: F, decorators: Sequence[Callable[[Any], Any]]) -> F:
    # As if stacked with @ in this order: the first one outermost.
    for deco in reversed(decorators):
        func = deco(func)
    return func


def _packed(func: F, cls: type, name: str) -> F:
    """`func` called with the parameters that are fields of `cls` packed into one
    `cls` instance, passed as `name`."""
    names = [f.name for f in fields(cls)]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs[name] = cls(**{n: kwargs.pop(n) for n in names})
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def parse_time_option(value: str | None, option: str) -> int | None:
    """A TIME option (ms or ISO-8601) in ms; None when not given."""
    if value is None:
        return None
    from kt.tools.dump_log import parse_time

    return parse_time(value, option)


# --- what to read and where to run ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class SparkArgs:
    """PATHS, where to run (--master, --conf) and what to read (the scan options)."""

    paths: tuple[str, ...]
    master: str
    confs: tuple[str, ...]
    topic: str | None
    topic_regex: str | None
    start_offset: int | None
    end_offset: int | None
    start_time: str | None
    end_time: str | None
    max_bytes_per_partition: int | None

    @property
    def ranged(self) -> bool:
        """True when an offset or time range limits the scan."""
        bounds = (self.start_offset, self.end_offset, self.start_time, self.end_time)
        return any(v is not None for v in bounds)


def spark_options(func: F) -> F:
    """The options every Spark command takes, passed to it as `spark_args: SparkArgs`."""
    return _apply(
        _packed(func, SparkArgs, "spark_args"),
        [
            click.argument("paths", nargs=-1, required=True),
            click.option(
                "--master",
                default="local[*]",
                show_default=True,
                help="Spark master URL: local[N], spark://host:port, yarn, ...",
            ),
            click.option(
                "--conf",
                "confs",
                multiple=True,
                metavar="KEY=VALUE",
                help="A Spark configuration property (repeatable).",
            ),
            click.option(
                "--topic", metavar="GLOB", help="Only topics matching these globs (a,b*)."
            ),
            click.option("--topic-regex", metavar="REGEX", help="Only topics matching this regex."),
            click.option(
                "--start-offset", type=click.IntRange(min=0), help="First offset (inclusive)."
            ),
            click.option(
                "--end-offset", type=click.IntRange(min=0), help="Last offset (exclusive)."
            ),
            click.option(
                "--start-time",
                metavar="TIME",
                help="Earliest timestamp, ms or ISO-8601 (inclusive).",
            ),
            click.option(
                "--end-time", metavar="TIME", help="Latest timestamp, ms or ISO-8601 (exclusive)."
            ),
            click.option(
                "--max-bytes-per-partition",
                type=click.IntRange(min=1),
                help="Split segments larger than this into several Spark tasks (default 128 MiB).",
            ),
        ],
    )


def make_scan(args: SparkArgs, *, resync: bool = True) -> Scan:
    """Check the paths (usage errors before Spark starts) and build the job's Scan."""
    from kt.spark import SparkMissingError, require_pyspark

    try:
        require_pyspark()
    except SparkMissingError as exc:
        fail(str(exc))
    from kt.spark.jobs import Scan
    from kt.spark.segments_source import expand_paths
    from kt.storage.errors import WrongFileKindError

    split = [p.strip() for raw in args.paths for p in raw.split(",") if p.strip()]
    if not split:
        usage_error("no path given")
    if args.topic_regex is not None:
        try:
            re.compile(args.topic_regex)
        except re.error as exc:
            usage_error(f"--topic-regex: {exc}")
    try:
        logs = expand_paths(split)
    except WrongFileKindError as exc:
        usage_error(str(exc))
    if not logs:
        usage_error(f"no segment files under {', '.join(split)}")
    return Scan(
        split,
        topic=args.topic,
        topic_pattern=args.topic_regex,
        start_offset=args.start_offset,
        end_offset=args.end_offset,
        start_time=parse_time_option(args.start_time, "--start-time"),
        end_time=parse_time_option(args.end_time, "--end-time"),
        resync=resync,
        max_bytes_per_partition=args.max_bytes_per_partition,
    )


def parse_confs(confs: tuple[str, ...]) -> dict[str, str]:
    """`--conf k=v` values as a dict (usage error when malformed)."""
    out = {}
    for c in confs:
        key, sep, value = c.partition("=")
        if not sep or not key.strip():
            usage_error(f"--conf: {c!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


_SOURCE_ERROR = re.compile(r"kt-segments: [^\n]*")


def spark_error_line(exc: BaseException) -> str:
    """One line for a failed Spark job: the source's own message when it has one."""
    text = str(exc)
    m = _SOURCE_ERROR.search(text)
    if m:
        return m.group(0).strip()
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return "could not start Spark: is a Java 17+ runtime installed and on PATH?"
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
    return f"Spark job failed: {first[:500]}"


@contextmanager
def spark_session(master: str, confs: tuple[str, ...], app: str) -> Iterator[Any]:
    """A session for one command; any Spark failure becomes one error line (exit 1)."""
    from kt.spark.jobs import session

    conf = parse_confs(confs)
    spark = None
    try:
        try:
            spark = session(master, conf, app)
        except Exception as exc:
            fail(spark_error_line(exc))
        try:
            yield spark
        except click.ClickException:
            raise
        except (BrokenPipeError, KeyboardInterrupt):
            raise
        except Exception as exc:
            fail(spark_error_line(exc))
    finally:
        if spark is not None:
            spark.stop()


def run_job(args: SparkArgs, scan: Scan, app: str, job: Callable[[Any, Scan], R]) -> R:
    """`job(spark, scan)` in a session named `app` on `args.master` with `args.confs`,
    stopped afterwards; a Spark failure becomes one error line (exit 1).

    The job writes or shows its result itself when that needs the session (a
    DataFrame read row by row); what it returns is returned."""
    with spark_session(args.master, args.confs, app) as spark:
        return job(spark, scan)


# --- where the result goes -----------------------------------------------------------


def to_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """--to DIR: write the result as a dataset."""
    return click.option("--to", "to", required=required, metavar="DIR", help=help)


def format_option(help: str) -> Callable[[F], F]:
    """--format parquet|json|csv, the dataset format of --to."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["parquet", "json", "csv"]),
        default="parquet",
        show_default=True,
        help=help,
    )


def mode_option(help: str) -> Callable[[F], F]:
    """--mode error|overwrite|append: what to do when --to exists."""
    return click.option(
        "--mode",
        type=click.Choice(["error", "overwrite", "append"]),
        default="error",
        show_default=True,
        help=help,
    )


def decode_option(choices: Sequence[str], help: str) -> Callable[[F], F]:
    """--decode: how binary keys and values become text (the first choice by default)."""
    return click.option(
        "--decode",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help=help,
    )


def json_option(help: str) -> Callable[[F], F]:
    """--json."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def write_dataset(df: Any, to: str, fmt: str, mode: str, **options: Any) -> None:
    """Write a DataFrame as a dataset; `mode` as --mode says it (error: fail if it exists)."""
    from kt.spark.jobs import write

    write(df, to, fmt, mode="errorifexists" if mode == "error" else mode, **options)


@dataclass(frozen=True, slots=True)
class OutputArgs:
    """Where a result goes: NDJSON (--json), a dataset (--to, --format, --mode) or a table."""

    as_json: bool
    to: str | None
    fmt: str
    mode: str

    def write(self, df: Any) -> None:
        """Write a result DataFrame to --to and say where."""
        assert self.to is not None
        write_dataset(df, self.to, self.fmt, self.mode)
        click.echo(f"wrote {self.to} ({self.fmt})", err=True)

    def show(
        self,
        rows: Iterable[Mapping[str, Any]],
        headers: Sequence[str],
        cells: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None,
    ) -> None:
        """Rows as NDJSON (each whole) or as a table of `headers` (`cells` makes a
        row's cells; by default its values under the headers)."""
        if self.as_json:
            for r in rows:
                emit_json(r)
            return
        if cells is None:
            render_table(headers, ([r[h] for h in headers] for r in rows))
        else:
            render_table(headers, (cells(r) for r in rows))


def output_options(func: F) -> F:
    """--json / --to DIR --format F --mode M, passed as `output: OutputArgs`."""
    return _apply(
        _packed(func, OutputArgs, "output"),
        [
            json_option("NDJSON, one object per row."),
            to_option("Write the result as a dataset in DIR instead of printing it."),
            format_option("The format of --to."),
            mode_option("When --to exists: fail, replace it, or add to it."),
        ],
    )
