"""SaslHandshake and SaslAuthenticate once a connection is past authentication.

Before authentication the network layer's SASL state machine answers them
(kt.broker.security.authenticator); a handshake that starts a re-authentication
never gets here either. What does reach the handlers is answered as Kafka's
KafkaApis answers it: ILLEGAL_SASL_STATE (on a listener without SASL too).
Both are advertised in ApiVersions, as Kafka does on every listener: Java clients
look for SaslHandshake there before authenticating.
"""

from __future__ import annotations

from typing import Any

from kt.broker.handlers import RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis


@handles(apis.SASL_HANDSHAKE.key, (0, 1))
async def sasl_handshake(ctx: RequestContext, request: Struct) -> Any:
    """ILLEGAL_SASL_STATE: the connection is authenticated (or not a SASL one)."""
    return apis.SASL_HANDSHAKE.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(apis.SASL_AUTHENTICATE.key, (0, 2))
async def sasl_authenticate(ctx: RequestContext, request: Struct) -> Any:
    """ILLEGAL_SASL_STATE with Kafka's message."""
    return apis.SASL_AUTHENTICATE.response(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
