"""What identity-provider tokens and an authorization handler add to an API call.

One thread is read (``GET /api/threads/{id}``: the thread, whether it runs, its usage) through
the app in process (httpx's ASGI transport, SQLite file), as:

- ``api token``: the project's own bearer token, no handler (the baseline);
- ``jwt``: an RS256 JWT from a local OIDC provider, the same token on every request (what a
  client does: verified once, then answered from the verified-token cache until it expires);
- ``jwt, verified each time``: a fresh token per request (minted beforehand), so every request
  pays the whole RS256 verification and the claims mapping;
- ``jwt + handler``: the same token, and a project whose authorization handler narrows every
  thread to the caller's tenant (asked on every request).

The variants run interleaved in rounds (so a busy machine slows them alike); each figure is the
median per request over the rounds, and the overhead is against ``api token``. Run:
``.venv/bin/python benchmarks/auth_overhead.py [--requests N] [--rounds R]``.

Then the added work alone, in CPU per call (process time): a cached and a full verification,
and the handler's decision on a thread, against the CPU of the plain API call.

Measured on a 2-core machine shared with other work (load average about 11; 300 requests x 7
rounds, one run): wall time per request api token 6123 us, jwt 6072 us (-0.8%), jwt verified
each time 10186 us (+66%), jwt + handler 7188 us (+17%: at this load the wall figures move by
more than the work they compare). CPU: a plain API call 2006 us; a cached verification 0.3 us
(0.02%); a full RS256 verification 227 us (11.3%, paid once per token and cache window of 5 s);
the handler's decision 11.9 us (0.59%).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from standardagents import Runtime, define_agent, define_prompt
from standardagents.definitions.authorization import (
    AuthorizationRequest,
    Narrow,
    define_authorization,
)
from standardagents.project import build_registry
from standardagents.server import create_app
from standardagents.store import open_store
from standardagents.testing.oidc import OidcProvider

__all__ = ["main"]

AUDIENCE = "bench-api"


def _same_tenant(request: AuthorizationRequest) -> Any:
    caller = request.caller
    if caller is None or caller.tenant is None:
        return None
    return Narrow(metadata={"tenant": caller.tenant})


async def _runtime(folder: Path, name: str, handler: bool) -> Runtime:
    definitions: list[Any] = [define_agent(name="helper", type="ai_human", side_a={"prompt": "p"}),
                              define_prompt(name="p", prompt="hi")]
    if handler:
        definitions.append(define_authorization(_same_tenant))
    store = open_store(f"sqlite:///{folder / f'{name}.db'}")
    return await Runtime.open(build_registry(*definitions), store=store)


async def _time(client: httpx.AsyncClient, path: str, headers: list[dict[str, str]]) -> float:
    """Seconds per request, ``len(headers)`` requests in a row."""
    start = time.perf_counter()
    for h in headers:
        r = await client.get(path, headers=h)
        if r.status_code != 200:
            raise SystemExit(f"{path}: {r.status_code} {r.text}")
    return (time.perf_counter() - start) / len(headers)


async def _cpu_per_call(fn: Any, calls: int) -> float:
    """CPU seconds per awaited call (process time: a busy machine's waiting is not counted)."""
    start = time.process_time()
    for _ in range(calls):
        await fn()
    return (time.process_time() - start) / calls


async def parts(calls: int) -> dict[str, float]:
    """CPU per call of the added work alone: a cached and a full JWT verification, the handler's
    decision on a thread, and the plain API call's CPU for scale."""
    from standardagents.records import ThreadRecord
    from standardagents.server.authorization import require_allowed
    from standardagents.server.oidc import JwtVerifier, OidcSettings

    with OidcProvider(audience=AUDIENCE, algorithms=("RS256",)) as idp, tempfile.TemporaryDirectory() as tmp:
        verifier = JwtVerifier(OidcSettings(issuer=idp.issuer, audience=AUDIENCE))
        token = idp.token(sub="alice", tenant="acme", expires_in=3600)
        identity = await verifier.verify(token)
        fresh = iter([idp.token(sub="alice", tenant="acme", n=i) for i in range(calls)])
        guarded = await _runtime(Path(tmp), "parts", handler=True)
        plain = await _runtime(Path(tmp), "plain", handler=False)
        try:
            thread = ThreadRecord(agent="helper", user_id="bob", metadata={"tenant": "acme"})
            app = create_app(plain, close_runtime=False)
            user = await plain.store.create_user("alice", user_id="alice")
            _, api_token = await plain.store.create_api_token(user.id, "bench")
            headers = {"Authorization": f"Bearer {api_token}"}
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
                path = f"/api/threads/{(await client.post('/api/threads', json={'agent': 'helper'}, headers=headers)).json()['id']}"

                async def call() -> None:
                    await client.get(path, headers=headers)

                await call()
                return {
                    "plain API call (CPU)": await _cpu_per_call(call, max(calls // 10, 50)),
                    "jwt verification, cached": await _cpu_per_call(lambda: verifier.verify(token), calls),
                    "jwt verification, full RS256": await _cpu_per_call(lambda: verifier.verify(next(fresh)), calls),
                    "handler decision": await _cpu_per_call(lambda: require_allowed(guarded, identity, thread), calls),
                }
        finally:
            await guarded.aclose()
            await plain.aclose()


async def run(requests: int, rounds: int) -> dict[str, float]:
    with OidcProvider(audience=AUDIENCE, algorithms=("RS256",)) as idp, tempfile.TemporaryDirectory() as tmp:
        os.environ["STANDARDAGENTS_AUTH_ISSUER"] = idp.issuer
        os.environ["STANDARDAGENTS_AUTH_AUDIENCE"] = AUDIENCE
        plain = await _runtime(Path(tmp), "plain", handler=False)
        guarded = await _runtime(Path(tmp), "guarded", handler=True)
        try:
            clients = {}
            for name, rt in (("plain", plain), ("guarded", guarded)):
                app = create_app(rt, close_runtime=False)
                clients[name] = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench")
            user = await plain.store.create_user("alice", user_id="alice")
            _, api_token = await plain.store.create_api_token(user.id, "bench")
            jwt = idp.token(sub="alice", tenant="acme", expires_in=3600)
            bearer = {"Authorization": f"Bearer {jwt}"}
            threads = {}
            for name, client in clients.items():
                created = await client.post("/api/threads", json={"agent": "helper"}, headers=bearer)
                threads[name] = f"/api/threads/{created.json()['id']}"
            fresh = [{"Authorization": f"Bearer {idp.token(sub='alice', tenant='acme', n=i)}"}
                     for i in range(requests * rounds)]
            variants = {
                "api token": ("plain", [{"Authorization": f"Bearer {api_token}"}] * requests),
                "jwt": ("plain", [bearer] * requests),
                "jwt, verified each time": ("plain", None),
                "jwt + handler": ("guarded", [bearer] * requests),
            }
            for which, headers in variants.values():  # warm every path once
                await _time(clients[which], threads[which], (headers or fresh)[:20])
            samples: dict[str, list[float]] = {name: [] for name in variants}
            for r in range(rounds):
                for name, (which, headers) in variants.items():
                    batch = headers if headers is not None else fresh[r * requests:(r + 1) * requests]
                    samples[name].append(await _time(clients[which], threads[which], batch))
            for client in clients.values():
                await client.aclose()
            return {name: statistics.median(values) for name, values in samples.items()}
        finally:
            await plain.aclose()
            await guarded.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    figures = asyncio.run(run(args.requests, args.rounds))
    base = figures["api token"]
    print(f"GET /api/threads/{{id}} in process, median of {args.rounds} rounds of {args.requests} requests")
    for name, seconds in figures.items():
        print(f"{name:<26} {seconds * 1e6:8.0f} us/request  {(seconds / base - 1) * 100:+6.1f}% vs api token")
    cpu = asyncio.run(parts(args.requests * 5))
    plain = cpu["plain API call (CPU)"]
    print("CPU per call of the added work alone")
    for name, seconds in cpu.items():
        share = "" if seconds is plain else f"  {seconds / plain * 100:5.2f}% of a plain API call"
        print(f"{name:<30} {seconds * 1e6:8.1f} us{share}")


if __name__ == "__main__":
    main()
