"""The cluster's data model and rules, pure and shared: partition state as ZooKeeper
stores it (leader, ISR, epochs), leader election rules, replica placement and
reassignment plans, and the preferred-leader imbalance measure.

The controller (kt.broker.controller) acts on these; the tools (`kt reassign-partitions`)
and the TUI compute with them, without depending on the broker. Like kt.storage and
kt.protocol, nothing here does I/O, and it uses only those two packages.
"""
