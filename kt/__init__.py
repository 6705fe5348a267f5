"""kt: a Kafka administration and forensics toolkit bundled with a Kafka-compatible broker."""

__version__ = "0.1.0"
