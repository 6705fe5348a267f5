"""The admin layer: what kt's commands (`kt.tools`) and its dashboard (`kt.tui`) both
need to administer a cluster over the wire, so that the two agree by construction.

- `reassign_plan`: kafka-reassign-partitions.sh's JSON files, plans and their checks;
- `reassignment`: reassignments in progress (progress, throttles, Kafka's --verify
  status);
- `offset_reset`: kafka-consumer-groups.sh --reset-offsets' planning;
- `describe`: the describe models (a group's lag per partition, its members and
  owners, partition state, what each broker leads and hosts, the controller).

It uses the client, the protocol, the storage core and the pure cluster model; it
never prints, never touches click or Textual, and never imports the tools, the TUI or
the broker (`tests/unit/test_layering.py`).
"""
