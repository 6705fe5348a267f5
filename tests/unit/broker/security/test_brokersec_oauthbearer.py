"""SASL/OAUTHBEARER on the broker: the client message format, the invalid-token JSON
challenge and its `\\x01` acknowledgement, the unsecured validator, and JWKS-validated
tokens (a key set in a `file:` URL, tokens signed with PyJWT)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from kt.broker.security.oauthbearer import (
    JwksCache,
    JwksValidator,
    OAuthBearerServer,
    TokenInvalid,
    UnsecuredValidator,
    initial_response,
    parse_initial_response,
    unsecured_token,
)
from kt.broker.security.sasl import IllegalSaslStateError, SaslAuthenticationError, SaslError

NOW = 1_700_000_000.0


def clock() -> float:
    return NOW


def unsecured(**kw: object) -> UnsecuredValidator:
    return UnsecuredValidator.from_options({k: str(v) for k, v in kw.items()}, clock=clock)


def test_initial_response_format() -> None:
    data = initial_response("a.b.", "alice", {"traceId": "42"})
    assert data == b"n,a=alice,\x01auth=Bearer a.b.\x01traceId=42\x01\x01"
    assert parse_initial_response(data) == ("alice", "a.b.", {"traceId": "42"})
    for bad in (b"n,,\x01\x01", b"y,,\x01auth=Bearer x\x01\x01",
                b"n,,\x01auth=Basic abc\x01\x01", b"n,,auth=Bearer x\x01\x01"):  # fmt: skip
        with pytest.raises(SaslError):
            parse_initial_response(bad)


def test_unsecured_token_authenticates_with_its_expiry() -> None:
    token = unsecured_token({"sub": "alice", "iat": NOW - 10, "exp": NOW + 60})
    server = OAuthBearerServer(unsecured())
    assert server.evaluate(initial_response(token)) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiry_ms == int((NOW + 60) * 1000)
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(initial_response(token))


def test_invalid_token_gets_kafkas_challenge_then_fails_with_it() -> None:
    token = unsecured_token({"sub": "alice", "exp": NOW - 1})
    server = OAuthBearerServer(unsecured())
    assert server.evaluate(initial_response(token)) == b'{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(b"\x01")
    assert str(info.value) == '{"status":"invalid_token"}'
    assert not server.complete


def test_required_scope_gives_insufficient_scope() -> None:
    token = unsecured_token({"sub": "alice", "exp": NOW + 60, "scope": "read"})
    server = OAuthBearerServer(unsecured(unsecuredValidatorRequiredScope="read write"))
    assert server.evaluate(initial_response(token)) == (
        b'{"status":"insufficient_scope", "scope":"read write"}'
    )
    ok = unsecured_token({"sub": "alice", "exp": NOW + 60, "scope": ["write", "read"]})
    assert unsecured(unsecuredValidatorRequiredScope="read write").validate(ok).principal == "alice"


@pytest.mark.parametrize(
    ("claims", "options"),
    [
        ({"exp": NOW + 60}, {}),  # no sub
        ({"sub": "alice"}, {}),  # no exp
        ({"sub": "alice", "exp": "soon"}, {}),
        ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 30}, {}),  # issued in the future
        ({"sub": "alice", "exp": NOW - 1}, {}),
        ({"user": "alice", "exp": NOW + 60}, {}),
    ],
)
def test_unsecured_validator_refusals(claims: dict[str, object], options: dict[str, str]) -> None:
    with pytest.raises(TokenInvalid):
        unsecured(**options).validate(unsecured_token(claims))


def test_unsecured_validator_options() -> None:
    v = unsecured(unsecuredValidatorPrincipalClaimName="user",
                  unsecuredValidatorAllowableClockSkewMs=5000)  # fmt: skip
    assert v.validate(unsecured_token({"user": "bob", "exp": NOW - 2})).principal == "bob"
    with pytest.raises(TokenInvalid):
        unsecured().validate("a.b.c")  # signed: not unsecured
    with pytest.raises(ValueError, match="unsecuredValidatorAllowableClockSkewMs"):
        unsecured(unsecuredValidatorAllowableClockSkewMs="x")


def test_authzid_must_be_the_tokens_principal() -> None:
    token = unsecured_token({"sub": "alice", "exp": NOW + 60})
    message = r"authorization id \(bob\) that is different from the token's principal name \(alice"
    with pytest.raises(SaslAuthenticationError, match=message):
        OAuthBearerServer(unsecured()).evaluate(initial_response(token, "bob"))


# --- JWKS (KIP-768) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory) -> tuple[rsa.RSAPrivateKey, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk |= {"kid": "k1", "use": "sig", "alg": "RS256"}
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return key, path


def _validator(path: Path, **kw: object) -> JwksValidator:
    cache = JwksCache(path.as_uri())
    cache.load()
    return JwksValidator(cache, **kw)  # type: ignore[arg-type]


def _signed(key: rsa.RSAPrivateKey, kid: str = "k1", **claims: object) -> str:
    now = time.time()
    body = {"sub": "svc", "iat": now, "exp": now + 300, "aud": "kafka", "iss": "https://idp"}
    body |= claims
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, "RS256",
                      headers={"kid": kid})  # fmt: skip


def test_jwks_validated_token(jwks: tuple[rsa.RSAPrivateKey, Path]) -> None:
    key, path = jwks
    v = _validator(path, audience=("kafka",), issuer="https://idp")
    server = OAuthBearerServer(v)
    assert server.evaluate(initial_response(_signed(key))) == b""
    assert server.authorization_id == "svc"
    assert server.credential_expiry_ms is not None


@pytest.mark.parametrize(
    "claims",
    [{"aud": "other"}, {"iss": "https://evil"}, {"exp": time.time() - 120},
     {"iat": None}, {"sub": None}, {"kid": "k2"}],
)  # fmt: skip
def test_jwks_refusals(jwks: tuple[rsa.RSAPrivateKey, Path], claims: dict[str, object]) -> None:
    key, path = jwks
    v = _validator(path, audience=("kafka",), issuer="https://idp")
    kid = str(claims.pop("kid", "k1"))
    with pytest.raises(TokenInvalid):
        v.validate(_signed(key, kid, **claims))
    if kid == "k2":
        assert v.jwks.due()  # an unknown key asks for a refresh


def test_jwks_refuses_unsigned_and_foreign_keys(jwks: tuple[rsa.RSAPrivateKey, Path]) -> None:
    _, path = jwks
    v = _validator(path)
    with pytest.raises(TokenInvalid, match="algorithm"):
        v.validate(unsecured_token({"sub": "svc", "exp": time.time() + 60}))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenInvalid, match="validation failed"):
        v.validate(_signed(other))


def test_jwks_url_and_content_checks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="https or file"):
        JwksCache("ftp://x/jwks")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a usable JWKS"):
        JwksCache(bad.as_uri()).load()
