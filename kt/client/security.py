"""How a client secures its connections: Kafka's (and librdkafka's) client properties
turned into a TLS context and a SASL mechanism.

`SecurityConfig.from_properties` reads the keys operators already have in a
`client.properties` (Kafka's Java names) or pass to kcat with `-X` (librdkafka's):

- `security.protocol`: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
- TLS: `ssl.ca.location` (PEM file or directory), `ssl.truststore.location` with
  `ssl.truststore.type` PEM or PKCS12 (and `ssl.truststore.password`),
  `ssl.truststore.certificates` (inline PEM); the client's own certificate for
  mutual TLS from `ssl.certificate.location` + `ssl.key.location` (+
  `ssl.key.password`), `ssl.keystore.location` PKCS12 or PEM (+
  `ssl.keystore.password`), or inline `ssl.keystore.certificate.chain` +
  `ssl.keystore.key`; `ssl.endpoint.identification.algorithm` (`https`, the
  default, checks the broker's name; empty or `none` does not);
  `enable.ssl.certificate.verification=false` (librdkafka) trusts any certificate;
  `ssl.enabled.protocols` / `ssl.protocol` (TLS 1.2 is the floor);
  `ssl.cipher.suites` (OpenSSL names).
- SASL: `sasl.mechanism` (or librdkafka's `sasl.mechanisms`) PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; credentials from `sasl.jaas.config`
  (Kafka's PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule) or
  `sasl.username`/`sasl.password` (librdkafka); OAUTHBEARER tokens from
  `sasl.oauthbearer.method=oidc` with `sasl.oauthbearer.token.endpoint.url`,
  `sasl.oauthbearer.client.id`, `sasl.oauthbearer.client.secret`,
  `sasl.oauthbearer.scope` (or the JAAS options clientId/clientSecret/scope), a
  static `sasl.oauthbearer.token`, or an unsecured development JWT
  (`sasl.oauthbearer.config=principal=alice` as librdkafka, or the JAAS
  `unsecuredLogin*` options as Kafka).

Any value may be `${env:NAME}` or `${file:/path}` (the file's contents, trimmed) or
`${file:/path:key}` (a key of a properties file), so secrets need not sit in the
file itself. Errors are `SecurityConfigError` with a one-line message naming the key.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.client.kerberos import KerberosLogin
from kt.protocol.sasl import (
    MECHANISMS,
    Mechanism,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslError,
    ScramMechanism,
    jwt_claims,
    unsecured_jwt,
)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityConfigError(ValueError):
    """A security setting is missing, unknown or wrong; the message names the key."""


#: security keys kt reads (Kafka's and librdkafka's names)
SECURITY_KEYS = frozenset(
    {
        "security.protocol",
        "ssl.ca.location",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.token",
        "sasl.login.callback.handler.class",
        "sasl.login.refresh.window.factor",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.principal",
        "sasl.kerberos.keytab",
    }
)

#: keys whose values are secrets: never printed
SECRET_KEYS = frozenset(
    {
        "ssl.truststore.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "sasl.jaas.config",
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token",
    }
)

_REFERENCE = re.compile(r"\$\{(env|file):([^}]*)\}")


def resolve_value(key: str, value: str) -> str:
    """`value` with `${env:NAME}`, `${file:/path}` and `${file:/path:key}` replaced."""

    def sub(m: re.Match[str]) -> str:
        kind, ref = m.group(1), m.group(2)
        if kind == "env":
            if ref not in os.environ:
                raise SecurityConfigError(f"{key}: environment variable {ref} is not set")
            return os.environ[ref]
        path, sep, prop = _split_file(ref)
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SecurityConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None
        if not sep:
            return text.strip()
        for line in text.splitlines():
            k, s, v = line.partition("=")
            if s and k.strip() == prop:
                return v.strip()
        raise SecurityConfigError(f"{key}: {path} has no key {prop}")

    return _REFERENCE.sub(sub, value)


def _split_file(ref: str) -> tuple[str, str, str]:
    # /path/to/file:key, where only the last ':' separates the key
    path, sep, prop = ref.rpartition(":")
    if not sep or "/" in prop:
        return ref, "", ""
    return path, sep, prop


# --- JAAS ------------------------------------------------------------------------------

_JAAS_TOKEN = re.compile(
    r"""\s*(?:(?P<word>[A-Za-z0-9_.$\-]+)|"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<eq>=)|(?P<semi>;))"""
)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`sasl.jaas.config` -> (login module class, options), as Kafka's JaasConfig
    reads it: `<Module> <flag> key=value ... ;` with quoted or bare values."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            raise SecurityConfigError(
                f"sasl.jaas.config: cannot parse near {text[pos : pos + 20]!r}"
            )
        pos = m.end()
        if m.group("word") is not None:
            tokens.append(("word", m.group("word")))
        elif m.group("dq") is not None or m.group("sq") is not None:
            raw = m.group("dq") if m.group("dq") is not None else m.group("sq")
            tokens.append(("str", re.sub(r"\\(.)", r"\1", raw)))
        elif m.group("eq"):
            tokens.append(("eq", "="))
        else:
            tokens.append(("semi", ";"))
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise SecurityConfigError("sasl.jaas.config: expected '<LoginModule> required ...;'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
        raise SecurityConfigError(f"sasl.jaas.config: unknown control flag {flag!r}")
    if tokens[-1][0] != "semi":
        raise SecurityConfigError(
            "sasl.jaas.config: JAAS config entry not terminated by semi-colon"
        )
    body = tokens[2:-1]
    if any(t == "semi" for t, _ in body):
        raise SecurityConfigError("sasl.jaas.config: exactly one login module is allowed")
    options: dict[str, str] = {}
    i = 0
    while i < len(body):
        if body[i][0] != "word" or i + 1 >= len(body) or body[i + 1][0] != "eq":
            raise SecurityConfigError("sasl.jaas.config: expected key=value")
        if i + 2 >= len(body) or body[i + 2][0] not in ("word", "str"):
            raise SecurityConfigError(
                f"sasl.jaas.config: value not specified for key {body[i][1]!r}"
            )
        options[body[i][1]] = body[i + 2][1]
        i += 3
    return module, options


_MODULE_MECHANISMS = {
    "PlainLoginModule": "PLAIN",
    "ScramLoginModule": "SCRAM",
    "OAuthBearerLoginModule": "OAUTHBEARER",
    "Krb5LoginModule": "GSSAPI",
}


# --- OAUTHBEARER tokens ----------------------------------------------------------------


@dataclass
class OAuthToken:
    """A bearer token and when it expires (epoch seconds; None: unknown)."""

    value: str
    expires_at: float | None
    principal: str | None = None


class TokenProvider:
    """Where OAUTHBEARER tokens come from; `token()` returns a fresh-enough one."""

    def __init__(self, refresh_factor: float = 0.8) -> None:
        self.refresh_factor = refresh_factor
        self._token: OAuthToken | None = None
        self._fetched_at = 0.0
        self._lock: asyncio.Lock | None = None

    async def token(self) -> OAuthToken:
        """The cached token, or a new one once `refresh_factor` of its life has gone."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = time.time()
            tok = self._token
            if tok is None or (
                tok.expires_at is not None
                and now
                >= self._fetched_at + (tok.expires_at - self._fetched_at) * self.refresh_factor
            ):
                self._token = await self._fetch()
                self._fetched_at = time.time()
                tok = self._token
            return tok

    async def _fetch(self) -> OAuthToken:
        raise NotImplementedError


class StaticTokenProvider(TokenProvider):
    """A token given in the configuration (it is not refreshed)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        claims = jwt_claims(token)
        exp = claims.get("exp")
        self._static = OAuthToken(token, float(exp) if isinstance(exp, int | float) else None,
                                  str(claims["sub"]) if "sub" in claims else None)  # fmt: skip

    async def _fetch(self) -> OAuthToken:
        return self._static

    async def token(self) -> OAuthToken:
        """Always the configured token."""
        return self._static


class UnsecuredJwtProvider(TokenProvider):
    """Unsecured JWTs (alg none) for development brokers, made afresh before expiry."""

    def __init__(self, principal: str, *, lifetime: float = 3600.0, scope: str | None = None,
                 claims: dict[str, Any] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.principal = principal
        self.lifetime = lifetime
        self.claims = dict(claims or {})
        if scope:
            self.claims["scope"] = scope

    async def _fetch(self) -> OAuthToken:
        now = time.time()
        tok = unsecured_jwt({"sub": self.principal, **self.claims}, now=now, lifetime=self.lifetime)
        return OAuthToken(tok, now + self.lifetime, self.principal)


class OidcTokenProvider(TokenProvider):
    """The OAuth 2 client-credentials grant (KIP-768): POST grant_type=client_credentials
    to the token endpoint with HTTP Basic client id:secret; `access_token` is the token."""

    def __init__(self, url: str, client_id: str, client_secret: str, *,
                 scope: str | None = None, timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:  # fmt: skip
        super().__init__()
        self.url = url
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self.timeout = timeout
        self.ssl_context = ssl_context

    async def _fetch(self) -> OAuthToken:
        return await asyncio.to_thread(self._fetch_blocking)

    def _fetch_blocking(self) -> OAuthToken:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(f"{self.client_id}:{self._secret}".encode()).decode()
        req = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            method="POST",
        )
        where = f"OAUTHBEARER token endpoint {self.url}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ssl_context) as r:
                doc = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            raise SecurityConfigError(
                f"{where}: HTTP {exc.code} for client {self.client_id}"
                + (f": {detail}" if detail else "")
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SecurityConfigError(f"{where}: {reason}") from None
        except ValueError:
            raise SecurityConfigError(f"{where}: the answer is not JSON") from None
        token = doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise SecurityConfigError(f"{where}: the answer has no access_token")
        now = time.time()
        expires_in = doc.get("expires_in")
        claims = jwt_claims(token)
        if isinstance(claims.get("exp"), int | float):
            expires_at: float | None = float(claims["exp"])
        elif isinstance(expires_in, int | float):
            expires_at = now + float(expires_in)
        else:
            expires_at = None
        sub = claims.get("sub")
        return OAuthToken(token, expires_at, str(sub) if sub else self.client_id)


# --- the configuration -----------------------------------------------------------------


@dataclass
class SecurityConfig:
    """The security of a client's connections, validated; build with `from_properties`."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    #: whether TLS checks the broker's host name (for messages)
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_provider: TokenProvider | None = None
    oauth_extensions: dict[str, str] = field(default_factory=dict)
    scram_extensions: dict[str, str] = field(default_factory=dict)
    #: what the CA/trust came from, for error messages
    trust_source: str = "the system's CA certificates"
    #: GSSAPI: service, principal, keytab
    kerberos: KerberosLogin | None = None
    #: whether TLS presents a client certificate (mutual TLS)
    client_certificate: bool = False
    #: the client certificate's subject (RFC 4514), when one is presented and readable
    client_subject: str | None = None

    @property
    def uses_tls(self) -> bool:
        """SSL or SASL_SSL."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """SASL_PLAINTEXT or SASL_SSL."""
        return self.protocol.startswith("SASL_")

    async def mechanism_for_connection(self, host: str = "") -> Mechanism:
        """A fresh mechanism instance (one per authentication) for a broker at `host`."""
        mech = self.mechanism
        if mech == "GSSAPI":
            from kt.client.kerberos import KerberosError
            from kt.client.kerberos import mechanism as gssapi_mechanism

            assert self.kerberos is not None
            try:
                # the first context step talks to the KDC: not on the event loop
                return await asyncio.to_thread(gssapi_mechanism, self.kerberos, host)
            except KerberosError as exc:
                raise SaslError(str(exc)) from None
        if mech == "PLAIN":
            assert self.username is not None and self.password is not None
            return PlainMechanism(self.username, self.password)
        if mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert self.username is not None and self.password is not None
            return ScramMechanism(mech, self.username, self.password,
                                  extensions=self.scram_extensions or None)  # fmt: skip
        if mech == "OAUTHBEARER":
            assert self.token_provider is not None
            tok = await self.token_provider.token()
            return OAuthBearerMechanism(tok.value, extensions=self.oauth_extensions or None,
                                        user=tok.principal)  # fmt: skip
        raise SecurityConfigError(f"sasl.mechanism={mech} is not supported")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> SecurityConfig:
        """Validate and build from client properties (other keys are ignored here)."""
        p = {k: resolve_value(k, v).strip() if k in SECURITY_KEYS else v
             for k, v in props.items()}  # fmt: skip
        protocol = (p.get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise SecurityConfigError(
                f"security.protocol={p['security.protocol']}: "
                f"expected one of {', '.join(PROTOCOLS)}"
            )
        cfg = cls(protocol=protocol)
        if cfg.uses_tls:
            cfg.ssl_context, cfg.check_hostname, cfg.trust_source = _tls_context(p)
            cfg.client_certificate = any(
                p.get(k)
                for k in (
                    "ssl.certificate.location",
                    "ssl.keystore.location",
                    "ssl.keystore.certificate.chain",
                )
            )
            if cfg.client_certificate:
                cfg.client_subject = _client_subject(p)
        if cfg.uses_sasl:
            _sasl_settings(cfg, p)
        return cfg

    def describe_principal(self) -> str:
        """Who these settings authenticate as, for people (never a secret): the SASL
        user and mechanism, the TLS client certificate's subject (the broker maps it
        to a principal with its ssl.principal.mapping.rules), or ANONYMOUS."""
        if self.uses_sasl:
            mech = self.mechanism or "SASL"
            if self.username:
                return f"User:{self.username} ({mech})"
            if self.kerberos is not None:
                return f"{self.kerberos.principal or 'the Kerberos ticket cache'} ({mech})"
            return f"the {mech} token's principal"
        if self.client_subject:
            return f"{self.client_subject} (TLS client certificate)"
        if self.client_certificate:
            return "the TLS client certificate's subject"
        return "User:ANONYMOUS"


def _truthy(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise SecurityConfigError(f"{key}={value}: expected true or false")


def _existing(key: str, path: str) -> str:
    if not Path(path).exists():
        raise SecurityConfigError(f"{key}: {path}: no such file")
    return path


def _tls_context(p: Mapping[str, str]) -> tuple[ssl.SSLContext, bool, str]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    protocols = {s.strip() for s in (p.get("ssl.enabled.protocols") or "").split(",") if s.strip()}
    if protocols:
        unknown = protocols - {"TLSv1.2", "TLSv1.3", "TLSv1", "TLSv1.1"}
        if unknown:
            raise SecurityConfigError(
                f"ssl.enabled.protocols: unknown {', '.join(sorted(unknown))}"
            )
        if "TLSv1.2" not in protocols:
            if "TLSv1.3" not in protocols:
                raise SecurityConfigError(
                    "ssl.enabled.protocols: kt speaks TLSv1.2 and TLSv1.3 only"
                )
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        if "TLSv1.3" not in protocols:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if p.get("ssl.cipher.suites"):
        try:
            ctx.set_ciphers(p["ssl.cipher.suites"].replace(",", ":"))
        except ssl.SSLError:
            raise SecurityConfigError(
                f"ssl.cipher.suites={p['ssl.cipher.suites']}: no cipher OpenSSL knows"
            ) from None

    algorithm = p.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise SecurityConfigError(
            f"ssl.endpoint.identification.algorithm={algorithm}: expected https or empty"
        )
    verify = _truthy("enable.ssl.certificate.verification",
                     p.get("enable.ssl.certificate.verification", "true"))  # fmt: skip
    ctx.check_hostname = verify and algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE

    source = "the system's CA certificates"
    trust_type = (p.get("ssl.truststore.type") or "").upper()
    if p.get("ssl.ca.location"):
        loc = _existing("ssl.ca.location", p["ssl.ca.location"])
        _load_verify(ctx, "ssl.ca.location", loc)
        source = f"ssl.ca.location ({loc})"
    elif p.get("ssl.truststore.location"):
        loc = _existing("ssl.truststore.location", p["ssl.truststore.location"])
        kind = trust_type or _guess_store_type(loc)
        if kind == "PEM":
            _load_verify(ctx, "ssl.truststore.location", loc)
        elif kind == "PKCS12":
            pems = _pkcs12_certs(loc, p.get("ssl.truststore.password"), "ssl.truststore.location")
            if not pems:
                raise SecurityConfigError(f"ssl.truststore.location: {loc} holds no certificate")
            ctx.load_verify_locations(cadata="".join(pems))
        else:
            raise SecurityConfigError(
                f"ssl.truststore.type={kind}: kt reads PEM and PKCS12 trust stores "
                "(convert JKS with: keytool -importkeystore -deststoretype PKCS12)"
            )
        source = f"ssl.truststore.location ({loc})"
    elif p.get("ssl.truststore.certificates"):
        try:
            ctx.load_verify_locations(cadata=p["ssl.truststore.certificates"])
        except ssl.SSLError:
            raise SecurityConfigError("ssl.truststore.certificates: not PEM certificates") from None
        source = "ssl.truststore.certificates"
    else:
        ctx.load_default_certs()

    _load_client_cert(ctx, p)
    return ctx, ctx.check_hostname, source


def _load_verify(ctx: ssl.SSLContext, key: str, loc: str) -> None:
    try:
        if Path(loc).is_dir():
            ctx.load_verify_locations(capath=loc)
        else:
            ctx.load_verify_locations(cafile=loc)
    except ssl.SSLError:
        raise SecurityConfigError(f"{key}: {loc}: not PEM certificates") from None


def _guess_store_type(path: str) -> str:
    head = Path(path).read_bytes()[:64]
    if b"-----BEGIN" in head or head.lstrip().startswith(b"-----"):
        return "PEM"
    if head[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    return "PKCS12"


def _pkcs12(path: str, password: str | None, key: str) -> tuple[Any, Any, list[Any]]:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # pragma: no cover - a dependency of kt
        raise SecurityConfigError(f"{key}: reading PKCS12 needs the cryptography package") from None
    try:
        return pkcs12.load_key_and_certificates(
            Path(path).read_bytes(), password.encode() if password else None
        )
    except ValueError:
        what = "wrong password or not a PKCS12 file" if password else (
            "not a PKCS12 file, or it needs a password")  # fmt: skip
        raise SecurityConfigError(f"{key}: {path}: {what}") from None


def _pkcs12_certs(path: str, password: str | None, key: str) -> list[str]:
    from cryptography.hazmat.primitives.serialization import Encoding

    _k, cert, extra = _pkcs12(path, password, key)
    certs = ([cert] if cert is not None else []) + list(extra or [])
    return [c.public_bytes(Encoding.PEM).decode() for c in certs]


def _load_client_cert(ctx: ssl.SSLContext, p: Mapping[str, str]) -> None:
    key_password = p.get("ssl.key.password") or None
    if p.get("ssl.certificate.location") or p.get("ssl.key.location"):
        if not p.get("ssl.certificate.location"):
            raise SecurityConfigError("ssl.key.location is set but ssl.certificate.location is not")
        cert = _existing("ssl.certificate.location", p["ssl.certificate.location"])
        key = (
            _existing("ssl.key.location", p["ssl.key.location"])
            if p.get("ssl.key.location")
            else None
        )
        _load_chain(ctx, cert, key, key_password, "ssl.certificate.location")
        return
    if p.get("ssl.keystore.certificate.chain") or p.get("ssl.keystore.key"):
        if not p.get("ssl.keystore.certificate.chain"):
            raise SecurityConfigError(
                "SSL private key is specified, but certificate chain is not specified."
            )
        _load_inline(ctx, p["ssl.keystore.certificate.chain"], p.get("ssl.keystore.key", ""),
                     key_password)  # fmt: skip
        return
    if not p.get("ssl.keystore.location"):
        return
    loc = _existing("ssl.keystore.location", p["ssl.keystore.location"])
    kind = (p.get("ssl.keystore.type") or _guess_store_type(loc)).upper()
    if kind == "PEM":
        _load_chain(ctx, loc, None, key_password, "ssl.keystore.location")
    elif kind == "PKCS12":
        from cryptography.hazmat.primitives.serialization import (
            BestAvailableEncryption,
            Encoding,
            PrivateFormat,
        )

        pkey, cert, extra = _pkcs12(loc, p.get("ssl.keystore.password"), "ssl.keystore.location")
        if pkey is None or cert is None:
            raise SecurityConfigError(f"ssl.keystore.location: {loc} has no key and certificate")
        # ssl loads keys from PEM only: hand it the PKCS12 contents as PEM text,
        # the key encrypted with a one-off password so no clear key touches disk.
        once = os.urandom(16).hex().encode()
        chain = "".join(c.public_bytes(Encoding.PEM).decode() for c in [cert, *(extra or [])])
        key_pem = pkey.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                     BestAvailableEncryption(once)).decode()  # fmt: skip
        _load_inline(ctx, chain, key_pem, once.decode())
    else:
        raise SecurityConfigError(
            f"ssl.keystore.type={kind}: kt reads PKCS12 and PEM key stores "
            "(convert JKS with: keytool -importkeystore -deststoretype PKCS12)"
        )


def _client_subject(p: Mapping[str, str]) -> str | None:
    """The subject of the client certificate the properties present (already loaded
    and checked by _load_client_cert); None when it cannot be read back."""
    from cryptography import x509

    try:
        if p.get("ssl.certificate.location"):
            data = Path(p["ssl.certificate.location"]).read_bytes()
        elif p.get("ssl.keystore.certificate.chain"):
            data = p["ssl.keystore.certificate.chain"].encode()
        else:
            loc = p["ssl.keystore.location"]
            kind = (p.get("ssl.keystore.type") or _guess_store_type(loc)).upper()
            if kind == "PKCS12":
                cert = _pkcs12(loc, p.get("ssl.keystore.password"), "ssl.keystore.location")[1]
                return str(cert.subject.rfc4514_string()) if cert is not None else None
            data = Path(loc).read_bytes()
        return x509.load_pem_x509_certificates(data)[0].subject.rfc4514_string()
    except Exception:  # a display nicety: the TLS handshake is what checks the certificate
        return None


class _NoPassword(Exception):
    pass


def _no_password() -> str:
    # without a callable, OpenSSL would prompt on the terminal for the key's password
    raise _NoPassword


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None, password: str | None,
                what: str) -> None:  # fmt: skip
    try:
        ctx.load_cert_chain(cert, key, password=password or _no_password)
    except _NoPassword:
        raise SecurityConfigError(
            f"{what}: the private key is encrypted: set ssl.key.password"
        ) from None
    except ssl.SSLError as exc:
        reason = (exc.reason or str(exc)).lower().replace("_", " ")
        if password and ("bad decrypt" in reason or "pem lib" in reason):
            raise SecurityConfigError(
                f"ssl.key.password: cannot decrypt the private key of {what}"
            ) from None
        if "key values mismatch" in reason:
            raise SecurityConfigError(
                f"{what}: the private key does not match the certificate"
            ) from None
        raise SecurityConfigError(
            f"{what}: cannot load the certificate and key ({reason})"
        ) from None


def _load_inline(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # ssl.load_cert_chain takes files only: a private temp file (0600), removed at once
    fd, path = tempfile.mkstemp(prefix="kt-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        _load_chain(ctx, path, None, password, "ssl.keystore")
    finally:
        os.unlink(path)


def _sasl_settings(cfg: SecurityConfig, p: Mapping[str, str]) -> None:
    mech = (p.get("sasl.mechanism") or p.get("sasl.mechanisms") or "").strip().upper()
    module = None
    options: dict[str, str] = {}
    if p.get("sasl.jaas.config"):
        module, options = parse_jaas(p["sasl.jaas.config"])
        short = module.rsplit(".", 1)[-1]
        family = _MODULE_MECHANISMS.get(short)
        if family is None:
            raise SecurityConfigError(f"sasl.jaas.config: unknown login module {module}")
        if not mech:
            if family == "SCRAM":
                raise SecurityConfigError(
                    "sasl.mechanism is not set: SCRAM-SHA-256 or SCRAM-SHA-512?"
                )
            mech = family
        elif not mech.startswith(family):
            raise SecurityConfigError(
                f"sasl.jaas.config: {short} does not fit sasl.mechanism={mech}"
            )
    if not mech:
        raise SecurityConfigError(
            f"security.protocol={cfg.protocol} needs sasl.mechanism ({', '.join(MECHANISMS)})"
        )
    if mech == "GSSAPI":
        cfg.mechanism = mech
        service = p.get("sasl.kerberos.service.name")
        jaas_service = options.get("serviceName")
        if service and jaas_service and service != jaas_service:
            raise SecurityConfigError(
                f"Conflicting serviceName values found in JAAS and Kafka configs "
                f"value in JAAS file {jaas_service}, value in Kafka config {service}"
            )
        service = service or jaas_service
        if not service:
            raise SecurityConfigError(
                "sasl.mechanism=GSSAPI needs sasl.kerberos.service.name (usually kafka)"
            )
        keytab = options.get("keyTab") or p.get("sasl.kerberos.keytab") or None
        if keytab and not Path(keytab).is_file():
            raise SecurityConfigError(f"Kerberos keytab {keytab}: no such file")
        principal = options.get("principal") or p.get("sasl.kerberos.principal") or None
        cfg.kerberos = KerberosLogin(service, principal, keytab)
        cfg.username = principal
        return
    if mech not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism={mech}: expected one of {', '.join(MECHANISMS)}")
    cfg.mechanism = mech
    if mech == "OAUTHBEARER":
        _oauth_settings(cfg, p, options)
        return
    user = options.get("username", p.get("sasl.username"))
    password = options.get("password", p.get("sasl.password"))
    if not user:
        raise SecurityConfigError(
            f"sasl.mechanism={mech} needs a user: username in sasl.jaas.config, or sasl.username"
        )
    if password is None:
        raise SecurityConfigError(
            f"sasl.mechanism={mech} needs a password: password in sasl.jaas.config, "
            "or sasl.password"
        )
    cfg.username, cfg.password = user, password
    if options.get("tokenauth", "").lower() == "true":
        cfg.scram_extensions["tokenauth"] = "true"


def _oauth_settings(cfg: SecurityConfig, p: Mapping[str, str], options: Mapping[str, str]) -> None:
    method = (p.get("sasl.oauthbearer.method") or "default").lower()
    url = p.get("sasl.oauthbearer.token.endpoint.url")
    factor = float(p.get("sasl.login.refresh.window.factor") or 0.8)
    for k, v in options.items():
        if k.startswith("extension_"):
            cfg.oauth_extensions[k[len("extension_") :]] = v
        elif k.startswith("unsecuredLoginExtension_"):
            cfg.oauth_extensions[k[len("unsecuredLoginExtension_") :]] = v
    for item in (p.get("sasl.oauthbearer.extensions") or "").split(","):
        if "=" in item:
            k, _, v = item.partition("=")
            cfg.oauth_extensions[k.strip()] = v.strip()
    provider: TokenProvider
    if p.get("sasl.oauthbearer.token"):
        provider = StaticTokenProvider(p["sasl.oauthbearer.token"])
    elif method == "oidc" or url:
        if not url:
            raise SecurityConfigError(
                "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url"
            )
        client_id = p.get("sasl.oauthbearer.client.id") or options.get("clientId")
        secret = p.get("sasl.oauthbearer.client.secret") or options.get("clientSecret")
        if not client_id or secret is None:
            raise SecurityConfigError(
                "OAUTHBEARER with a token endpoint needs sasl.oauthbearer.client.id and "
                "sasl.oauthbearer.client.secret (or clientId/clientSecret in sasl.jaas.config)"
            )
        scope = p.get("sasl.oauthbearer.scope") or options.get("scope")
        timeout = float(p.get("sasl.login.read.timeout.ms") or 10000) / 1000
        https_ctx = ssl.create_default_context()
        if p.get("ssl.ca.location") and Path(p["ssl.ca.location"]).is_file():
            https_ctx.load_verify_locations(cafile=p["ssl.ca.location"])
        provider = OidcTokenProvider(url, client_id, secret, scope=scope, timeout=timeout,
                                     ssl_context=https_ctx)  # fmt: skip
    else:
        principal, lifetime, scope, claims = _unsecured_options(p, options)
        if principal is None:
            raise SecurityConfigError(
                "OAUTHBEARER needs a token: sasl.oauthbearer.method=oidc with a token "
                "endpoint, sasl.oauthbearer.token, or (development) "
                "sasl.oauthbearer.config=principal=NAME"
            )
        provider = UnsecuredJwtProvider(principal, lifetime=lifetime, scope=scope, claims=claims)
    provider.refresh_factor = factor
    cfg.token_provider = provider


def _unsecured_options(
    p: Mapping[str, str], options: Mapping[str, str]
) -> tuple[str | None, float, str | None, dict[str, Any]]:
    principal: str | None = None
    lifetime = 3600.0
    scope: str | None = None
    claims: dict[str, Any] = {}
    # librdkafka: sasl.oauthbearer.config="principal=alice scope=a,b lifeSeconds=600"
    for item in (p.get("sasl.oauthbearer.config") or "").split():
        k, _, v = item.partition("=")
        if k == "principal":
            principal = v
        elif k == "lifeSeconds":
            lifetime = float(v)
        elif k == "scope":
            scope = v.replace(",", " ")
    # Kafka: OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    for k, v in options.items():
        if k.startswith("unsecuredLoginStringClaim_"):
            claims[k[len("unsecuredLoginStringClaim_") :]] = v
        elif k.startswith("unsecuredLoginNumberClaim_"):
            claims[k[len("unsecuredLoginNumberClaim_") :]] = float(v) if "." in v else int(v)
        elif k.startswith("unsecuredLoginListClaim_") and v:
            claims[k[len("unsecuredLoginListClaim_") :]] = [s for s in v[1:].split(v[0]) if s]
        elif k == "unsecuredLoginLifetimeSeconds":
            lifetime = float(v)
    if principal is None and principal_claim in claims:
        principal = str(claims.pop(principal_claim))
    return principal, lifetime, scope, claims
