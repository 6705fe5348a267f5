"""`kt cluster describe`: cluster id, controller and brokers."""

from __future__ import annotations

import click

from kt.client import ClusterDescription, KafkaClient
from kt.tools.console import emit_json, handle_errors, render_table
from kt.tools.wire import Wire, wire_options


@click.group()
def cluster() -> None:
    """Describe the cluster a broker belongs to.

    \b
    Examples:
      kt cluster describe -b kafka1:9092
      kt cluster describe --json | jq .cluster_id
    """


@cluster.command()
@wire_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@handle_errors
def describe(wire: Wire, as_json: bool) -> None:
    """Print the cluster id, the controller and a table of brokers (ID HOST PORT RACK).

    Uses DescribeCluster when the broker has it, else Metadata.
    """

    async def go(c: KafkaClient) -> ClusterDescription:
        return await c.describe_cluster()

    d = wire.run(go)
    if as_json:
        emit_json(
            {
                "cluster_id": d.cluster_id,
                "controller": d.controller_id,
                "brokers": [
                    {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in d.brokers
                ],
            }
        )
        return
    click.echo(f"Cluster ID: {d.cluster_id or '-'}")
    click.echo(f"Controller: {d.controller_id if d.controller_id >= 0 else '-'}")
    render_table(
        ["ID", "HOST", "PORT", "RACK"],
        [[b.node_id, b.host, b.port, b.rack or "-"] for b in d.brokers],
    )
