"""What a tool declares it needs: typed variables, its own env values (tenvs), the state
capabilities it uses, and the network it may reach.

These are declarations for operators and for the runtime, never for the model: none of them
is part of the tool's JSON Schema or of any message. The runtime resolves variables from the
env scopes before a call, hands the tool a state narrowed to what it uses, and gives a tool
that declares ``network`` a ``fetch`` limited to its hosts (see :mod:`standardagents.fetch`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, TypedDict, get_args

from pydantic import Field, field_validator, model_validator

from ._base import Definition

__all__ = [
    "CAPABILITIES",
    "Capability",
    "FetchCredential",
    "FetchCredentialFields",
    "NetworkFields",
    "NetworkPolicy",
    "TenvRawShape",
    "ToolTenvs",
    "ToolVariables",
    "VariableDefinition",
    "VariableFields",
    "VariableType",
    "coerce_variable",
]

#: the types a variable may have (the spec's ``VariableType``): ``secret`` is a string shown
#: to operators only as set or not set
VariableType = Literal["string", "number", "integer", "boolean", "secret", "json", "url"]

#: the state capabilities a tool may declare in ``uses``
Capability = Literal["files", "messages", "env", "values", "subagents", "code", "network",
                     "tools", "effects", "credentials", "skills"]
CAPABILITIES: tuple[str, ...] = get_args(Capability)

_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def coerce_variable(kind: str, value: Any) -> Any:
    """``value`` as a variable of type ``kind``, or ``ValueError`` saying why not.

    Env values are often strings (set from a shell or an admin form), so ``"5"`` is a number,
    ``"true"`` a boolean and a JSON text a ``json`` value."""
    if kind in ("string", "secret", "url"):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        if kind == "url" and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value
    if kind in ("number", "integer"):
        if isinstance(value, bool):
            raise ValueError("expected a number, got a boolean")
        number: Any = value
        if isinstance(value, str):
            try:
                number = int(value) if kind == "integer" else float(value)
            except ValueError:
                raise ValueError(f"{value!r} is not {'an integer' if kind == 'integer' else 'a number'}") from None
        if not isinstance(number, int | float) or (isinstance(number, float) and not math.isfinite(number)):
            raise ValueError(f"expected a number, got {value!r}")
        if kind == "integer":
            if isinstance(number, float) and not number.is_integer():
                raise ValueError(f"{value!r} is not an integer")
            return int(number)
        return number
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        raise ValueError(f"{value!r} is not a boolean (true or false)")
    if kind == "json":
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        return value
    raise ValueError(f"unknown variable type {kind!r}")


class VariableFields(TypedDict, total=False):
    """A variable declaration as a dict (what ``define_tool(variables={...})`` takes)."""

    type: VariableType
    description: str
    default: Any
    optional: bool
    env_key: str
    envKey: str


class VariableDefinition(Definition):
    """One typed configuration value a tool reads (the spec's ``VariableDefinition``).

    Resolved before each call from the env: the thread's, then the user's, then the
    instance's, then the agent's ``env`` and the tool's ``tenvs``, under ``env_key`` (the
    variable's own name when not given); else ``default``. A variable with none of these and
    not ``optional`` fails the call with an error naming where it looked."""

    type: VariableType = "string"
    description: str = ""
    default: Any = None
    #: when nothing sets it and it has no default, the tool gets ``None`` instead of an error
    optional: bool = False
    #: the env key it is read from (the variable's name when ``None``)
    env_key: str | None = None

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set and self.default is not None

    @model_validator(mode="after")
    def _check_default(self) -> VariableDefinition:
        if self.has_default:
            try:
                object.__setattr__(self, "default", coerce_variable(self.type, self.default))
            except ValueError as exc:
                raise ValueError(f"default does not fit the type {self.type!r}: {exc}") from None
        if self.env_key is not None and not _VARIABLE_NAME.match(self.env_key):
            raise ValueError(f"env_key {self.env_key!r} is not an env key (letters, digits and underscores)")
        return self

    def describe(self) -> dict[str, Any]:
        """What an operator sees: a secret's default is never shown."""
        out: dict[str, Any] = {"type": self.type, "description": self.description,
                               "required": not (self.optional or self.has_default)}
        if self.env_key:
            out["envKey"] = self.env_key
        if self.has_default:
            out["default"] = "<hidden>" if self.type == "secret" else self.default
        return out


#: a tool's variables by name (the spec's ``ToolVariables``)
ToolVariables = Mapping[str, VariableDefinition | VariableFields]
#: env values a tool provides itself, below every other env source (the spec's ``ToolTenvs``)
ToolTenvs = Mapping[str, str | int | float | bool]
#: the raw shape of tenvs as a definition file writes them (the spec's ``TenvRawShape``)
TenvRawShape = Mapping[str, Any]


class FetchCredentialFields(TypedDict, total=False):
    grant: str
    header: str
    scheme: str | None
    scope: str | None


class FetchCredential(Definition):
    """Which credential grant the runtime attaches to requests for one host, and how (by
    default ``Authorization: Bearer <secret>``); the tool's code never sees the secret."""

    grant: str
    header: str = "Authorization"
    scheme: str | None = "Bearer"
    scope: str | None = None

    @field_validator("header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9-]{1,64}$", value):
            raise ValueError(f"{value!r} is not an HTTP header name")
        return value


class NetworkFields(TypedDict, total=False):
    allow: list[str]
    timeout: float
    max_bytes: int
    maxBytes: int
    credentials: Mapping[str, str | FetchCredential | FetchCredentialFields]
    max_redirects: int
    maxRedirects: int


class NetworkPolicy(Definition):
    """Where a tool's ``fetch`` may go and how far: the hosts it may reach (``host``,
    ``host:port`` or ``*.domain``), a timeout per request in seconds, a limit on the bytes
    of a response body, and the credential grant attached per host."""

    allow: list[str] = Field(min_length=1)
    timeout: float = Field(default=10.0, gt=0, le=600)
    max_bytes: int = Field(default=1 << 20, gt=0)
    max_redirects: int = Field(default=5, ge=0, le=20)
    credentials: dict[str, FetchCredential] = Field(default_factory=dict)

    @field_validator("allow")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        bad = [h for h in hosts if not isinstance(h, str) or not _HOST.match(h)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a host (write host, host:port or *.domain, without a scheme)")
        return [h.lower() for h in hosts]

    @field_validator("credentials", mode="before")
    @classmethod
    def _grants(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k).lower(): ({"grant": v} if isinstance(v, str) else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _credential_hosts(self) -> NetworkPolicy:
        unknown = [h for h in self.credentials if h not in self.allow]
        if unknown:
            raise ValueError(f"credentials name the host {unknown[0]!r}, which is not in allow ({', '.join(self.allow)})")
        return self

    def describe(self) -> dict[str, Any]:
        return {"allow": list(self.allow), "timeout": self.timeout, "maxBytes": self.max_bytes,
                "credentials": {host: c.grant for host, c in self.credentials.items()}}


def check_variable_names(variables: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems with the names of declared variables (they are env keys)."""
    return [(f"variables.{name}", f"{name!r} is not a variable name (letters, digits and underscores)")
            for name in variables if not isinstance(name, str) or not _VARIABLE_NAME.match(name)]
