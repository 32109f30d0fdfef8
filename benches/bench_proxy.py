"""What `ctxrules proxy` adds to an agent's calls, and how fast it records them.

Three processes, as in real use: a loopback upstream (aiohttp), the proxy
(`ctxrules proxy`, observe mode, recording into a SQLite store) and the client
(httpx2, the vendors' SDKs' HTTP stack) in this process.  The same client calls the
upstream directly and through the proxy, one call at a time and 64 at once:

* per request: the time of a whole non-streamed call (a small JSON answer);
* per first byte and per chunk: a stream of ``CHUNKS`` server-sent events sent
  ``GAP`` seconds apart, each stamped with the upstream's monotonic clock when it was
  written (``CLOCK_MONOTONIC`` is one clock for every process of the machine), so a
  chunk's delay is when the client read it minus when the upstream wrote it: a proxy
  that buffered would delay the early chunks by the whole stream.

The added latency at a percentile is the proxy's figure minus the direct one.
``test_recording_rate`` times the recorder alone: calls of a real cassette (varied
sizes, streamed and not) queued at once, until all are written into SQLite.

Under ``--benchmark-disable`` (``make test``) each runs a few calls as a correctness
check (every byte through the proxy equals the direct ones, every call recorded);
``make bench`` or ``python benches/bench_proxy.py`` measures for real and prints the
table written into benches/README.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Events per stream, and the upstream's pause between two.
CHUNKS, GAP = 20, 0.002

UPSTREAM = r"""
import asyncio, json, sys, time
from aiohttp import web

ANSWER = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 1}}).encode()
CHUNKS, GAP = int(sys.argv[1]), float(sys.argv[2])

def event(name, data):
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

async def handle(request):
    body = await request.json()
    if not body.get("stream"):
        return web.Response(body=ANSWER, content_type="application/json")
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(event("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "m", "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 1}}, "t": time.monotonic_ns()}))
    await resp.write(event("content_block_start", {"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}, "t": time.monotonic_ns()}))
    for i in range(CHUNKS):
        await asyncio.sleep(GAP)
        await resp.write(event("content_block_delta", {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": f"w{i} "}, "t": time.monotonic_ns()}))
    for name, data in (("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": CHUNKS}}), ("message_stop", {"type": "message_stop"})):
        await resp.write(event(name, {**data, "t": time.monotonic_ns()}))
    await resp.write_eof()
    return resp

async def main():
    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _start(argv: list[str], ready: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert ready in line or line.strip().isdigit(), line
    return proc, line


class Servers:
    """The upstream and the proxy, started in their own processes, stopped at exit."""

    def __init__(self, store: Path):
        self.store = store

    def __enter__(self) -> Servers:
        self.up, port = _start([sys.executable, "-c", UPSTREAM, str(CHUNKS), str(GAP)], "")
        self.direct = f"http://127.0.0.1:{port.strip()}"
        argv = [
            sys.executable,
            "-m",
            "ctxrules",
            "proxy",
            "--port",
            "0",
            "--store",
            str(self.store),
        ]
        self.proxy, line = _start([*argv, "--upstream-anthropic", self.direct], "ctxrules proxy")
        self.proxied = line.split(" on ", 1)[1].split(",", 1)[0]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in (self.proxy, self.up):
            p.send_signal(2)  # SIGINT: the proxy writes what it queued, then stops
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


HEADERS = {
    "x-api-key": "sk-bench",
    "anthropic-version": "2023-06-01",
    "content-type": "application/json",
}


def _body(i: int, stream: bool) -> bytes:
    return json.dumps(
        {
            "model": "m",
            "max_tokens": 64,
            "stream": stream,
            "messages": [{"role": "user", "content": f"call {i}"}],
        }
    ).encode()


async def _calls(base: str, n: int, concurrency: int, stream: bool) -> dict[str, list[float]]:
    """``n`` calls, ``concurrency`` at a time: seconds per request, to first byte, and
    each chunk's delay (read minus written)."""
    out: dict[str, list[float]] = {"request": [], "first_byte": [], "chunk": []}
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                started = time.monotonic_ns()
                first = None
                buf = b""
                async with client.stream(
                    "POST", "/v1/messages", content=_body(i, stream), headers=HEADERS
                ) as r:
                    async for chunk in r.aiter_raw():
                        now = time.monotonic_ns()
                        first = first or now
                        buf += chunk
                        while b"\n\n" in buf:
                            event, buf = buf.split(b"\n\n", 1)
                            data = event.split(b"data: ", 1)[1]
                            out["chunk"].append((now - json.loads(data)["t"]) / 1e9)
                done = time.monotonic_ns()
                out["request"].append((done - started) / 1e9)
                out["first_byte"].append(((first or done) - started) / 1e9)

        await asyncio.gather(*(one(i) for i in range(n)))
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def measure(
    servers: Servers, n: int, concurrency: int, stream: bool
) -> dict[str, dict[str, float]]:
    """p50 / p99 (ms) direct, proxied and added, for each measure."""
    # Alternate the two in rounds, so both see the same load of a shared machine.
    direct: dict[str, list[float]] = {"request": [], "first_byte": [], "chunk": []}
    proxied: dict[str, list[float]] = {"request": [], "first_byte": [], "chunk": []}
    rounds = 4 if n >= 4 * concurrency else 1
    for _ in range(rounds):
        for base, into in ((servers.direct, direct), (servers.proxied, proxied)):
            for key, values in asyncio.run(_calls(base, n // rounds, concurrency, stream)).items():
                into[key] += values
    table = {}
    for key in ("request", "first_byte", "chunk"):
        if not direct[key] or (key == "chunk" and not stream):
            continue
        row = {}
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            d, p = _pct(direct[key], q), _pct(proxied[key], q)
            row.update({f"direct_{name}": d, f"proxy_{name}": p, f"added_{name}": p - d})
        table[key] = row
    return table


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with Servers(tmp_path_factory.mktemp("proxy") / "store") as s:
        yield s


@pytest.mark.parametrize("concurrency", [1, 64])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_added_latency(benchmark, servers, concurrency, stream):
    n = 8 * concurrency if benchmark.disabled else max(300, 8 * concurrency)
    table = benchmark.pedantic(
        measure, args=(servers, n, concurrency, stream), rounds=1, iterations=1
    )
    benchmark.extra_info.update(
        {k: {m: round(v, 3) for m, v in row.items()} for k, row in table.items()}
    )
    assert table["request"]["proxy_p50"] > 0
    if stream and concurrency == 1:  # no chunk waits for the stream's end
        assert table["chunk"]["proxy_p50"] < CHUNKS * GAP * 1000 / 2


def test_bytes_through_the_proxy_equal_the_direct_ones(servers):
    """The figures compare like with like: the proxy hands on what the upstream sent."""
    direct = httpx2.post(servers.direct + "/v1/messages", content=_body(0, False), headers=HEADERS)
    proxied = httpx2.post(
        servers.proxied + "/v1/messages", content=_body(0, False), headers=HEADERS
    )
    assert direct.content == proxied.content and direct.status_code == proxied.status_code == 200


def _recorded_calls(corpus: Path) -> list:
    """Calls of a real cassette as the proxy's handlers queue them (bytes and headers)."""
    from tests.proxy.loopback import recorded_requests, recorded_responses

    from ctxrules.proxy import Call  # deferred: the optional extra ctxrules[proxy]

    path = corpus / "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml"
    responses = recorded_responses(path)["openai-chat"]
    out = []
    for (_wire, body, _uri), resp in zip(recorded_requests(path), responses):
        out.append(
            Call(
                path="/v1/chat/completions",
                request=json.dumps(body).encode(),
                request_headers={},
                status=resp.status,
                response=resp.body,
                response_headers=resp.headers,
                at=time.time(),
            )
        )
    return out


def test_recording_rate(benchmark, corpus, tmp_path):
    from ctxrules.proxy import Recorder  # deferred: the optional extra ctxrules[proxy]

    calls = _recorded_calls(corpus)
    total = 64 if benchmark.disabled else 4000
    stores = iter(range(1000))

    def setup():
        rec = Recorder(str(tmp_path / f"store{next(stores)}"), report=print)
        rec.start()
        return (rec,), {}

    def run(rec):
        for i in range(total):
            rec.submit(calls[i % len(calls)])
        assert rec.flush(300)
        rec.stop()
        return rec

    rec = benchmark.pedantic(run, setup=setup, rounds=1 if benchmark.disabled else 3, iterations=1)
    assert rec.recorded == total and rec.failed == 0 and rec.dropped == 0
    benchmark.extra_info.update(calls=total, distinct=len(calls))


def main() -> None:
    """Measure and print the table of benches/README.md."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, Servers(Path(tmp) / "store") as servers:
        for stream in (False, True):
            for concurrency in (1, 64):
                n = max(400, 10 * concurrency)
                table = measure(servers, n, concurrency, stream)
                for key, row in table.items():
                    print(
                        f"| {'SSE' if stream else 'JSON'} | {concurrency} | {key} | "
                        + " | ".join(
                            f"{row[c]:.2f}"
                            for c in (
                                "direct_p50",
                                "proxy_p50",
                                "added_p50",
                                "direct_p99",
                                "proxy_p99",
                                "added_p99",
                            )
                        )
                        + " |",
                        flush=True,
                    )
    sys.path.insert(0, str(ROOT))
    from ctxrules.proxy import Recorder  # deferred: the optional extra ctxrules[proxy]

    calls = _recorded_calls(ROOT / "tests" / "data" / "corpus")
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            rec = Recorder(os.path.join(tmp, "store"))
            rec.start()
            started = time.perf_counter()
            for i in range(4000):
                rec.submit(calls[i % len(calls)])
            rec.flush()
            elapsed = time.perf_counter() - started
            rec.stop()
            rate = rec.recorded / elapsed
            print(f"recorded {rec.recorded} calls in {elapsed:.2f} s: {rate:,.0f} calls/s")


if __name__ == "__main__":
    main()
