"""Topic administration through aiokafka's and kafkajs's admin clients (confluent-kafka
and kafka-python are covered in test_admin_apis.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

JS_DIR = Path(__file__).resolve().parent.parent / "js"


def test_aiokafka_admin_topic_lifecycle(kt_broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kt_broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic("aio-admin", 3, 1, topic_configs={"retention.ms": "3600000"})]
            )
            assert "aio-admin" in await admin.list_topics()
            # aiokafka hands back the response; the error is in it.
            again = await admin.create_topics([NewTopic("aio-admin", 1, 1)])
            codes = [t[1] for t in again.topic_errors]
            assert codes == [TopicAlreadyExistsError.errno]
            (described,) = await admin.describe_topics(["aio-admin"])
            assert described["error_code"] == 0
            assert len(described["partitions"]) == 3
            await admin.create_partitions({"aio-admin": NewPartitions(5)})
            (described,) = await admin.describe_topics(["aio-admin"])
            assert len(described["partitions"]) == 5
            await admin.delete_topics(["aio-admin"])
            assert "aio-admin" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(main())


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_kafkajs_admin_topic_lifecycle(kt_broker) -> None:
    import json

    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        if os.environ.get("CI"):
            pytest.fail("tests/js/node_modules is missing: scripts/setup installs it")
        pytest.skip("run scripts/setup to install kafkajs")
    spec = {
        "brokers": [kt_broker.bootstrap],
        "topic": "js-admin",
        "partitions": 2,
        "configs": {"cleanup.policy": "compact"},
        "morePartitions": 4,
    }
    proc = subprocess.run(
        ["node", str(JS_DIR / "kt-client.js"), "admin-topics"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=60,
    )
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert proc.returncode == 0, (result, proc.stderr.decode()[-2000:])
    assert result["created"] is True
    assert result["createdAgain"] is False
    assert result["listed"] is True
    assert result["partitions"] == 2
    assert result["configs"]["cleanup.policy"] == "compact"
    assert result["grownPartitions"] == 4
    assert result["listedAfterDelete"] is False
