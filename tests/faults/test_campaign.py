"""The bounded fault campaign: a 3-broker cluster under every fault kind at least once
for about two minutes, then the checker on the recorded history.

The seed is fixed (KT_FAULT_SEED overrides it to replay another run) and printed with
the report on failure; `bench/fault_campaign.py` runs longer campaigns.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zk_harness import zookeeper_available

from .campaign import FAULT_KINDS, CampaignResult, run_campaign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SEED = int(os.environ.get("KT_FAULT_SEED", "20261124"))
DURATION = float(os.environ.get("KT_FAULT_DURATION", "90"))


@pytest.mark.timeout(420)
@pytest.mark.skipif(not zookeeper_available(), reason="needs Debian's zookeeper and java")
def test_bounded_fault_campaign(tmp_path: Path) -> None:
    # KT_FAULT_DIR keeps the history and the brokers' logs for a look afterwards
    directory = Path(os.environ["KT_FAULT_DIR"]) if os.environ.get("KT_FAULT_DIR") else tmp_path
    result = run_campaign(directory, SEED, DURATION, transactions=True)
    report = result.report()
    assert result.txn_final_read_ok, f"seed {SEED}: transactional final read incomplete\n{report}"
    assert result.verdict.transactions.get("committed", 0) > 0, report
    _assert_valid(result)


def _assert_valid(result: CampaignResult) -> None:
    report = result.report()
    print(report)
    assert set(result.faults) == set(FAULT_KINDS), report
    assert not result.harness_errors, report
    assert not result.problems, f"seed {SEED}: the cluster misbehaved under faults\n{report}"
    assert result.verdict.acknowledged > 0, report
    assert result.final_read_ok, f"seed {SEED}: final read incomplete\n{report}"
    assert result.verdict.valid, f"seed {SEED}: anomalies found\n{report}"
