"""What a ``define_provider`` provider costs over the built-in one it extends.

Workload: the OpenAI wire stub in a process of its own (so its work is not counted) answers
every chat request with a short text; this process sends the same request through

* ``built-in``: ``ProviderSpec(provider="openai")``, the OpenAI-compatible provider;
* ``defined``: a gateway defined with ``define_provider(extends="openai")`` whose key comes
  from an environment slot (a secret, so errors are scrubbed on the way out), with an
  override header filled from a runtime value and one override body field;
* ``built-in again``: the first variant once more, a control: its distance from
  ``built-in`` is the noise.

Then the wrapper alone: the same definition around a provider that answers at once (20 text
deltas streamed, or a whole reply), against that provider called directly, so what the
definition adds per call is measured without the network's noise.

Each round makes ``--calls`` calls of each variant in turn (streamed and whole replies
alternating; the order rotates from round to round) and records the CPU time of this process
per call; the medians over the rounds are printed. Usage: ``python benchmarks/defined_provider.py [--rounds 21] [--calls 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from standardagents import define_provider, provider_env, provider_value
from standardagents.providers.base import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    StreamDelta,
    StreamEnd,
    TextDelta,
)
from standardagents.providers.defined import (
    DefinedProvider,
    build_defined,
    resolve_config,
    set_provider_values,
)
from standardagents.providers.factory import ProviderSpec, build_provider

REQUEST = ModelRequest(model="bench-model", messages=[{"role": "system", "content": "You help."},
                                                      {"role": "user", "content": "Say something short."}])


def start_stub() -> tuple[subprocess.Popen[str], str]:
    stub = subprocess.Popen([sys.executable, "-m", "standardagents.testing.openai_stub", "--max-seconds", "900"],
                            stdout=subprocess.PIPE, text=True)
    assert stub.stdout is not None
    line = stub.stdout.readline().strip()
    if not line.startswith("READY "):
        stub.kill()
        raise SystemExit(f"the stub did not start: {line!r}")
    return stub, line.split(" ", 1)[1]


async def one_call(provider: ModelProvider, streamed: bool) -> None:
    if streamed:
        async for delta in provider.stream(REQUEST):
            if isinstance(delta, StreamEnd):
                assert delta.response.text
    else:
        assert (await provider.request(REQUEST)).text


async def cpu_per_call(provider: ModelProvider, calls: int) -> float:
    started = time.process_time()
    for i in range(calls):
        await one_call(provider, streamed=i % 2 == 0)
    return (time.process_time() - started) / calls


class InstantProvider(ModelProvider):
    """Answers at once: 20 text deltas when streamed, one whole reply otherwise."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="ok")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        for _ in range(20):
            yield TextDelta("x")
        yield StreamEnd(ModelResponse(text="x" * 20))


async def wrapper_alone(gateway: Any, rounds: int) -> dict[str, float]:
    inner = InstantProvider()
    variants: dict[str, ModelProvider] = {"instant": inner,
                                          "instant, defined": DefinedProvider(gateway, inner, resolve_config(gateway))}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, provider in variants.items():
            samples[name].append(await cpu_per_call(provider, 2000))
    return {name: statistics.median(values) for name, values in samples.items()}


async def main(rounds: int, calls: int) -> None:
    stub, base_url = start_stub()
    try:
        os.environ["BENCH_GATEWAY_KEY"] = "sk-bench-gateway"
        gateway = define_provider(
            name="bench-gateway", extends="openai",
            config={"base_url": provider_value("base_url", secret=False), "api_key": provider_env("BENCH_GATEWAY_KEY"),
                    "tenant": provider_value("tenant")},
            override={"headers": {"X-Tenant": "{tenant}"}, "body": {"route": "fast"}})
        set_provider_values("bench-gateway", base_url=base_url, tenant="acme")
        variants: dict[str, ModelProvider] = {
            "built-in": build_provider(ProviderSpec(provider="openai", base_url=base_url, api_key="sk-bench")),
            "defined": build_defined(gateway),
        }
        variants["built-in again"] = build_provider(ProviderSpec(provider="openai", base_url=base_url, api_key="sk-bench"))
        for provider in variants.values():  # warm the connections and the code paths
            await cpu_per_call(provider, 50)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        order = list(variants)
        for round_ in range(rounds):
            # each round starts with another variant, so no variant always runs first or last
            for name in order[round_ % len(order):] + order[:round_ % len(order)]:
                samples[name].append(await cpu_per_call(variants[name], calls))
        for provider in variants.values():
            await provider.aclose()
    finally:
        stub.terminate()
        stub.wait(10)
    print(f"CPU per call, median of {rounds} rounds of {calls} calls (half streamed), client process only:")
    for name, values in samples.items():
        print(f"  {name:15s} {statistics.median(values) * 1e6:8.1f} us")
    base, defined = statistics.median(samples["built-in"]), statistics.median(samples["defined"])
    again = statistics.median(samples["built-in again"])
    print(f"  defined - built-in: {(defined - base) * 1e6:+.1f} us ({(defined / base - 1) * 100:+.1f}%); "
          f"noise (built-in again - built-in): {(again - base) * 1e6:+.1f} us")
    alone = await wrapper_alone(gateway, rounds)
    print("The definition's own work, around a provider that answers at once (median per call):")
    for name, value in alone.items():
        print(f"  {name:17s} {value * 1e6:8.2f} us")
    print(f"  added by the definition: {(alone['instant, defined'] - alone['instant']) * 1e6:+.2f} us per call")


def cli(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    asyncio.run(main(args.rounds, args.calls))


if __name__ == "__main__":
    cli()
