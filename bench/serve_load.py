#!/usr/bin/env python3
"""serve_load.py -- load generator for `kiln serve` (any OpenAI-compatible server).

Sends -b concurrent streaming completions, each a prompt of -s random token
ids generating exactly -o tokens (ignore_eos), the same workload as
`kiln bench -b B -s S -o O`, and prints throughput and latency percentiles:
time to first token (TTFT), inter-token latency (ITL: gaps between streamed
chunks), time per output token (TPOT: (last - first) / (tokens - 1)) and
end-to-end latency. With --offline-tok-s (the "output tokens/s" of
`kiln bench` on the same machine and workload) it also prints the serving /
offline ratio against the 90% target.

    kiln serve --model M --device cuda --port 8000 &
    python3 bench/serve_load.py -b 256 -s 128 -o 256 --offline-tok-s 5120

Only the Python standard library is used (asyncio streams, HTTP/1.1 with
chunked transfer decoding), so it runs anywhere the server is reachable.
Exit status: 0, or 1 when a request failed or the ratio is under --target.
"""
import argparse
import asyncio
import json
import math
import random
import sys
import time
import urllib.parse
import urllib.request


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Result:
    def __init__(self):
        self.t_send = self.t_first = self.t_end = None
        self.chunk_times = []
        self.tokens = 0
        self.prompt_tokens = 0
        self.error = None


async def read_chunked(reader):
    """Yield the body pieces of a chunked HTTP/1.1 response."""
    while True:
        line = await reader.readline()
        if not line:
            return
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def one_request(host, port, path, headers, body, res):
    res.t_send = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        res.error = f"connect: {e}"
        return
    try:
        data = json.dumps(body).encode()
        head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", "Accept: text/event-stream"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await writer.drain()
        status = await reader.readline()
        parts = status.split()
        code = int(parts[1]) if len(parts) > 1 else 0
        hdrs = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if code != 200:
            n = int(hdrs.get("content-length", "0") or 0)
            err = await reader.readexactly(n) if n else await reader.read(2000)
            res.error = f"HTTP {code}: {err[:200].decode(errors='replace')}"
            return
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            pieces = read_chunked(reader)
        else:
            async def plain():
                while True:
                    d = await reader.read(65536)
                    if not d:
                        return
                    yield d
            pieces = plain()
        buf = b""
        async for piece in pieces:
            now = time.perf_counter()
            buf += piece
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue  # SSE comments (heartbeats)
                payload = event[6:]
                if payload == b"[DONE]":
                    res.t_end = now
                    continue
                obj = json.loads(payload)
                if "error" in obj:
                    res.error = obj["error"].get("message", "error")
                    continue
                if obj.get("usage"):
                    res.tokens = obj["usage"]["completion_tokens"]
                    res.prompt_tokens = obj["usage"]["prompt_tokens"]
                if obj.get("choices"):
                    if res.t_first is None:
                        res.t_first = now
                    res.chunk_times.append(now)
        if res.t_end is None and res.error is None:
            res.error = "stream ended without [DONE]"
    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
        res.error = f"{type(e).__name__}: {e}"
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


def get_json(url, api_key):
    req = urllib.request.Request(url)
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


async def run(args):
    u = urllib.parse.urlparse(args.url)
    host, port = u.hostname, u.port or 80
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    info = get_json(args.url.rstrip("/") + "/v1/models", args.api_key)
    model = args.model or info["data"][0]["id"]
    vocab = args.vocab
    if not vocab:
        try:
            vocab = get_json(args.url.rstrip("/") + "/engine_check", args.api_key).get("vocab_size")
        except OSError:
            vocab = None
        vocab = vocab or 32000
    rng = random.Random(args.seed)
    lo = min(100, vocab // 4)

    def body(n_out):
        return {"model": model, "prompt": [rng.randrange(lo, vocab) for _ in range(args.s)], "max_tokens": n_out,
                "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}

    for _ in range(args.warmup):  # warm-up (JIT, caches)
        r = Result()
        await one_request(host, port, "/v1/completions", headers, body(min(args.o, 8)), r)
        if r.error:
            raise SystemExit(f"serve_load: warm-up request failed: {r.error}")

    n = args.requests or args.b
    results = [Result() for _ in range(n)]
    bodies = [body(args.o) for _ in range(n)]
    sem = asyncio.Semaphore(args.b)

    async def worker(i):
        async with sem:
            await one_request(host, port, "/v1/completions", headers, bodies[i], results[i])

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(n)))
    wall = time.perf_counter() - t0
    return model, results, wall


def report(args, model, results, wall):
    ok = [r for r in results if not r.error]
    errors = [r.error for r in results if r.error]
    out_tok = sum(r.tokens for r in ok)
    in_tok = sum(r.prompt_tokens for r in ok)
    ttft = [(r.t_first - r.t_send) * 1e3 for r in ok if r.t_first]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    tpot = [(r.chunk_times[-1] - r.t_first) * 1e3 / (r.tokens - 1) for r in ok
            if r.t_first and r.tokens > 1 and r.chunk_times]
    e2e = [r.t_end - r.t_send for r in ok if r.t_end]
    tps = out_tok / wall if wall > 0 else 0.0
    summary = {
        "model": model, "requests": len(results), "concurrency": args.b, "input": args.s, "output": args.o,
        "wall_s": wall, "output_tokens": out_tok, "output_tok_s": tps, "total_tok_s": (out_tok + in_tok) / wall,
        "requests_s": len(ok) / wall, "errors": len(errors),
        "ttft_ms": {p: pct(ttft, p) for p in (50, 90, 99)}, "itl_ms": {p: pct(itl, p) for p in (50, 90, 99)},
        "tpot_ms": {p: pct(tpot, p) for p in (50, 90, 99)}, "e2e_s": {p: pct(e2e, p) for p in (50, 90, 99)},
    }
    ratio = None
    if args.offline_tok_s:
        ratio = tps / args.offline_tok_s
        summary["offline_tok_s"] = args.offline_tok_s
        summary["ratio"] = ratio
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"serve_load: {model} at {args.url}: {len(results)} requests, concurrency {args.b}, "
              f"input {args.s}, output {args.o} tokens (streaming, ignore_eos)")
        print(f"  wall time          {wall:10.3f} s")
        print(f"  output tokens/s    {tps:10.1f}   ({out_tok} tokens; expected {len(results) * args.o})")
        print(f"  total tokens/s     {summary['total_tok_s']:10.1f}")
        print(f"  requests/s         {summary['requests_s']:10.2f}")
        print(f"  {'':17}{'p50':>10}{'p90':>10}{'p99':>10}")
        for name, key, unit in (("TTFT", "ttft_ms", "ms"), ("ITL", "itl_ms", "ms"), ("TPOT", "tpot_ms", "ms"),
                                ("E2E", "e2e_s", "s")):
            v = summary[key]
            print(f"  {name + ' (' + unit + ')':17}{v[50]:10.2f}{v[90]:10.2f}{v[99]:10.2f}")
        print(f"  errors             {len(errors):10d}" + (f"   first: {errors[0]}" if errors else ""))
        if ratio is not None:
            verdict = "PASS" if ratio >= args.target else "FAIL"
            print(f"  vs offline         {100 * ratio:9.1f} %  of {args.offline_tok_s:.1f} tok/s "
                  f"(target >= {100 * args.target:.0f} %): {verdict}")
    bad = bool(errors) or (ratio is not None and ratio < args.target) or out_tok != len(results) * args.o
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL")
    ap.add_argument("-b", type=int, default=256, help="concurrent requests (default 256)")
    ap.add_argument("-s", type=int, default=128, help="prompt length in tokens (default 128)")
    ap.add_argument("-o", type=int, default=256, help="output tokens per request (default 256)")
    ap.add_argument("--requests", type=int, default=0, help="total requests (default: -b, one wave)")
    ap.add_argument("--model", help="model name (default: the server's first)")
    ap.add_argument("--api-key", help="Bearer key")
    ap.add_argument("--vocab", type=int, default=0, help="prompt ids are drawn below this (default: the server's)")
    ap.add_argument("--warmup", type=int, default=1, help="warm-up requests before timing (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--offline-tok-s", type=float, help="kiln bench output tokens/s for the same workload")
    ap.add_argument("--target", type=float, default=0.9, help="required serving/offline ratio (default 0.9)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    model, results, wall = asyncio.run(run(args))
    sys.exit(report(args, model, results, wall))


if __name__ == "__main__":
    main()
