"""Transactions, as Apache Kafka 3.x's transaction coordinator runs them.

`metadata.py` holds one transactional id's state machine, `state_log.py` the
`__transaction_state` record format and topic, `state_manager.py` which ids this
broker coordinates (loading, fencing, replicated writes), `markers.py` the
WriteTxnMarkers retry loop and `sender.py` its connections, `coordinator.py` the
operations behind InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions and ListTransactions, and `service.py` the wiring into a
broker. The partition leaders' side of KIP-890 part 1: `verification.py` holds a
partition's verification guards, `verifier.py` asks coordinators (verify-only
AddPartitionsToTxn) before a transactional produce opens a transaction.
"""
