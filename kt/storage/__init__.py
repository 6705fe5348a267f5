"""The storage core: Kafka's on-disk formats and the partition log engine.

Pure: file I/O only. No sockets, no click, no printing. Everything that reads or
writes a log directory — the broker and every offline tool — goes through here.
"""
