"""The broker's security: listeners and their protocols, TLS, SASL mechanisms, the
ACL authorizer and its storage, as Apache Kafka 3.8's ZooKeeper-mode brokers do them.

Every module here is pure (sans-IO where it talks a protocol) and checked with
`mypy --strict`; the network layer and the handlers wire them in.
"""
