"""ApiVersions: the API version ranges this broker serves."""

from __future__ import annotations

from typing import Any

from kt.broker.handlers import SERVED, RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis


@handles(apis.API_VERSIONS.key, (0, 4))
async def api_versions(ctx: RequestContext, request: Struct) -> Any:
    """Every API key we serve with its advertised min and max version."""
    return apis.API_VERSIONS.response(
        error_code=ErrorCode.NONE,
        api_keys=[
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(SERVED.items())
        ],
        throttle_time_ms=0,
    )
