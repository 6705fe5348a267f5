"""kt's data pipeline on Spark: PySpark data sources for log directories and live topics,
and the forensic jobs behind `kt analyze` and `kt export`.

PySpark is an optional extra (`pip install 'kt[spark]'`); importing this package
without it raises SparkMissingError with the install hint. Register the sources on
a session with one line::

    from kt.spark import register
    register(spark)                      # "kt-segments" and "kt"
    spark.read.format("kt-segments").load("/var/lib/kafka/data").show()
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "PySpark is not installed: pip install 'kt[spark]' (needs a Java 17+ runtime)"


class SparkMissingError(ImportError):
    """PySpark (the `spark` extra) is not installed."""


def require_pyspark() -> None:
    """Raise SparkMissingError with the install hint when PySpark is missing."""
    try:
        import pyspark
        import pyspark.sql.datasource  # noqa: F401
    except ImportError as exc:
        raise SparkMissingError(INSTALL_HINT) from exc


def register(spark: Any) -> None:
    """Register every kt data source ("kt-segments", "kt") on a SparkSession."""
    require_pyspark()
    from kt.spark import sources

    for source in sources.ALL_SOURCES:
        spark.dataSource.register(source)
