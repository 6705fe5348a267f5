"""Named connection profiles, as rpk keeps them: bootstrap servers plus client
properties (security.protocol, ssl.*, sasl.*) under a name, in one file in the
user's configuration directory.

The file is `$XDG_CONFIG_HOME/kt/profiles.json` (`~/.config/kt/profiles.json`
without XDG_CONFIG_HOME; `KT_CONFIG` names another file). It is JSON::

    {"version": 1, "current": "prod",
     "profiles": {"prod": {"bootstrap": "b1:9093", "properties": {...}}}}

Secrets belong in an environment variable or a file, referenced from a property
value as `${env:NAME}` or `${file:/path}`; stored inline they still work, but the
file is then kept private (written 0600), `show` masks them, and a profile file
readable by other users earns a warning on stderr each time it is read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.client.security import SECRET_KEYS
from kt.storage.atomic import atomic_write

VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ProfileError(Exception):
    """A profile file that cannot be read or written, or an unknown profile."""


def config_path() -> Path:
    """Where the profiles live."""
    if os.environ.get("KT_CONFIG"):
        return Path(os.environ["KT_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kt" / "profiles.json"


@dataclass
class Profile:
    """One named cluster: where it is and how to connect."""

    name: str
    bootstrap: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The profile as stored."""
        out: dict[str, Any] = {}
        if self.bootstrap:
            out["bootstrap"] = self.bootstrap
        out["properties"] = dict(sorted(self.properties.items()))
        return out

    def masked(self) -> dict[str, Any]:
        """The profile for display: secret values that are not references hidden."""
        props = {k: mask(k, v) for k, v in sorted(self.properties.items())}
        return {"name": self.name, "bootstrap": self.bootstrap, "properties": props}


def is_secret(key: str) -> bool:
    """Whether `key` holds a secret (password, key, token, JAAS config)."""
    return key in SECRET_KEYS or "password" in key or key.endswith("secret")


_JAAS_SECRET = re.compile(r"""(password|clientSecret)\s*=\s*("[^"]*"|'[^']*'|[^\s;]+)""")


def holds_inline_secret(key: str, value: str) -> bool:
    """Whether the value itself is a secret (not a ${env:..}/${file:..} reference)."""
    if not is_secret(key) or value.startswith("${"):
        return False
    if key == "sasl.jaas.config":
        return any(not m.group(2).strip("'\"").startswith("${")
                   for m in _JAAS_SECRET.finditer(value))  # fmt: skip
    return True


def mask(key: str, value: str) -> str:
    """`value` as shown to users: secrets as ******, references (${env:..}) as they are."""
    if not is_secret(key) or value.startswith("${"):
        return value
    if key == "sasl.jaas.config":
        # keep the login module and the user visible: operators check those
        def hide(m: re.Match[str]) -> str:
            if m.group(2).strip("'\"").startswith("${"):
                return m.group(0)
            return f'{m.group(1)}="******"'

        return _JAAS_SECRET.sub(hide, value)
    return "******"


@dataclass
class ProfileStore:
    """The profiles file: load, change, save (atomically, owner-only)."""

    path: Path
    current: str | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    #: a warning about the file's permissions, when it is readable by others
    warning: str | None = None

    @classmethod
    def load(cls, path: Path | None = None) -> ProfileStore:
        """The store at `path` (default `config_path()`); empty when there is none."""
        p = path or config_path()
        store = cls(p)
        try:
            text = p.read_text()
            mode = p.stat().st_mode
        except FileNotFoundError:
            return store
        except OSError as exc:
            raise ProfileError(f"{p}: {exc.strerror}") from None
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            store.warning = f"{p} is readable by other users and may hold secrets (chmod 600 {p})"
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ProfileError(f"{p}: not valid JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise ProfileError(f"{p}: not a kt profiles file (version {VERSION})")
        for name, body in (doc.get("profiles") or {}).items():
            props = body.get("properties") or {}
            store.profiles[name] = Profile(name, body.get("bootstrap"),
                                           {str(k): str(v) for k, v in props.items()})  # fmt: skip
        cur = doc.get("current")
        store.current = cur if cur in store.profiles else None
        return store

    def save(self) -> None:
        """Write the file atomically with mode 0600 (it may hold secrets)."""
        doc = {
            "version": VERSION,
            "current": self.current,
            "profiles": {n: p.to_json() for n, p in sorted(self.profiles.items())},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = (json.dumps(doc, indent=2) + "\n").encode()
        # atomic_write keeps the mode of the file it replaces: make that 0600 first,
        # so the secrets are never readable by others, not even for a moment
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            os.chmod(self.path, 0o600)
        atomic_write(self.path, data)

    def get(self, name: str) -> Profile:
        """The profile `name`, or ProfileError listing the ones there are."""
        prof = self.profiles.get(name)
        if prof is None:
            have = ", ".join(sorted(self.profiles)) or "none"
            raise ProfileError(f"no profile {name!r} (profiles: {have}; kt profile create)")
        return prof


def check_name(name: str) -> str | None:
    """An error message when `name` is not a usable profile name, else None."""
    if not _NAME.match(name):
        return f"profile name {name!r}: use letters, digits, '.', '_' and '-' (at most 64)"
    return None
