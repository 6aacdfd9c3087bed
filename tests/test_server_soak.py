#!/usr/bin/env python3
# label: model
"""test_server_soak.py -- 300 concurrent mixed requests against a real
`kiln serve --device cpu` (completions and chat, streaming and not, n 1-2,
stop strings, logprobs, seeds), 30% of them cancelled by the client at a
random point (before the answer, mid-stream). Throughout, /metrics must parse
with `promtool check metrics`. Afterwards: no request runs or waits, the KV
cache is empty, the server's file descriptors are back to their baseline,
every request that was not cancelled succeeded, and identical greedy
requests gave identical text. Bounded: small max_tokens on the tiny model.
"""
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import (Server, check, metric, parse_metrics, parse_sse, promtool_check,  # noqa: E402
                         require_promtool)

N = 300
CANCEL = 0.3
GREEDY = {"prompt": "The kiln is hot and", "max_tokens": 16, "temperature": 0}
PROMPTS = ["The kiln is hot and", "Hello world", "Once upon a time", "Glaze the pot", "a b c d e f g",
           "Firing schedule:", "cone 6 oxidation"]


def make_request(i, rng):
    if i % 15 == 0:  # identical greedy requests, never cancelled
        return "/v1/completions", dict(GREEDY), False, "greedy"
    chat = rng.random() < 0.5
    b = {"max_tokens": rng.randint(4, 40), "temperature": rng.choice([0, 0.8]), "stream": rng.random() < 0.5}
    if b["temperature"]:
        b["seed"] = rng.randint(0, 1000)
    if rng.random() < 0.3:
        b["n"] = 2
    if rng.random() < 0.2:
        b["stop"] = [rng.choice(["e", "th", " a", "zz"])]
    if rng.random() < 0.2:
        b["ignore_eos"] = True
    if b["stream"] and rng.random() < 0.5:
        b["stream_options"] = {"include_usage": True}
    if chat:
        b["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
        if rng.random() < 0.2:
            b["logprobs"], b["top_logprobs"] = True, 2
        path = "/v1/chat/completions"
    else:
        b["prompt"] = rng.choice(PROMPTS) if rng.random() < 0.8 else [rng.randint(3, 500) for _ in range(20)]
        if rng.random() < 0.2:
            b["logprobs"] = 2
        path = "/v1/completions"
    return path, b, rng.random() < CANCEL, "mixed"


def run_one(port, path, b, cancel, rng, out, i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, json.dumps(b), {"Content-Type": "application/json"})
        if cancel and (not b.get("stream") or rng.random() < 0.3):
            # leave before the answer arrives
            time.sleep(rng.uniform(0, 0.3))
            c.sock.shutdown(socket.SHUT_RDWR)
            out[i] = ("cancelled", None)
            return
        r = c.getresponse()
        if r.status != 200:
            out[i] = ("status", (r.status, r.read()[:300]))
            return
        if b.get("stream"):
            if cancel:  # leave mid-stream
                for _ in range(rng.randint(1, 4)):
                    if not r.readline():
                        break
                c.sock.shutdown(socket.SHUT_RDWR)
                out[i] = ("cancelled", None)
                return
            events, _ = parse_sse(r.read().decode())
            out[i] = ("ok", events)
        else:
            out[i] = ("ok", json.loads(r.read()))
    except Exception as e:  # noqa: BLE001
        out[i] = ("exception", repr(e))
    finally:
        c.close()


def texts_of(path, b, result):
    """choice index -> text, and finish reasons, from a response."""
    texts, fins = {}, {}
    if b.get("stream"):
        check(result[-1] == "[DONE]", f"stream without [DONE]: {result[-2:]}")
        for e in result[:-1]:
            check("error" not in e, f"error chunk: {e}")
            for ch in e["choices"]:
                t = ch["delta"].get("content") or "" if "delta" in ch else ch["text"]
                texts[ch["index"]] = texts.get(ch["index"], "") + t
                if ch.get("finish_reason"):
                    fins[ch["index"]] = ch["finish_reason"]
    else:
        for ch in result["choices"]:
            texts[ch["index"]] = ch["message"]["content"] if "message" in ch else ch["text"]
            fins[ch["index"]] = ch["finish_reason"]
    return texts, fins


def main():
    promtool = require_promtool()
    rng = random.Random(1234)
    with Server() as s:
        ref = s.post("/v1/completions", GREEDY).json()["choices"][0]["text"]
        time.sleep(0.2)
        fd0 = s.fds()
        reqs = [make_request(i, rng) for i in range(N)]
        out = [None] * N
        stop_metrics = threading.Event()
        metric_checks = [0]
        metric_errors = []

        def scrape():
            while not stop_metrics.is_set():
                try:
                    r = s.get("/metrics", timeout=30)
                    check(r.status == 200, f"/metrics {r.status}")
                    text = r.body.decode()
                    parse_metrics(text)
                    promtool_check(text, promtool)
                    metric_checks[0] += 1
                except Exception as e:  # noqa: BLE001
                    metric_errors.append(repr(e))
                    return
                time.sleep(0.2)
        scraper = threading.Thread(target=scrape)
        scraper.start()
        t0 = time.time()
        threads = []
        for i, (path, b, cancel, _) in enumerate(reqs):
            t = threading.Thread(target=run_one, args=(s.port, path, b, cancel, random.Random(i), out, i))
            t.start()
            threads.append(t)
        for t in threads:
            t.join(180)
        dt = time.time() - t0
        stop_metrics.set()
        scraper.join()
        check(not metric_errors, f"/metrics check failed during the soak: {metric_errors}")
        check(metric_checks[0] >= 3, f"/metrics checked only {metric_checks[0]} times")

        n_cancel = n_ok = 0
        for i, ((path, b, cancel, kind), res) in enumerate(zip(reqs, out)):
            check(res is not None, f"request {i} did not finish")
            status, val = res
            if cancel:
                check(status in ("cancelled", "ok"), f"request {i}: {res}")
                n_cancel += 1
                continue
            check(status == "ok", f"request {i} ({path} {b}): {res}")
            texts, fins = texts_of(path, b, val)
            n = b.get("n", 1)
            check(sorted(texts) == list(range(n)) and sorted(fins) == list(range(n)), f"request {i}: {val}")
            check(all(f in ("stop", "length") for f in fins.values()), f"request {i}: {fins}")
            if kind == "greedy":
                check(texts[0] == ref, f"greedy request {i}: {texts[0]!r} != {ref!r}")
            n_ok += 1

        m = s.wait_idle(timeout=20)
        check(metric(m, "vllm:num_requests_running") == 0 and metric(m, "vllm:kv_cache_usage_perc") == 0, "idle")
        aborted = metric(m, "vllm:request_success_total", finished_reason="abort")
        check(aborted >= 1, "no request was aborted although 30% were cancelled")
        deadline = time.time() + 10
        while s.fds() > fd0 and time.time() < deadline:
            time.sleep(0.1)
        check(s.fds() <= fd0, f"server fds {s.fds()} > baseline {fd0}")
        promtool_check(s.metrics()[0], promtool)
        # still serving the same greedy text
        check(s.post("/v1/completions", GREEDY).json()["choices"][0]["text"] == ref, "greedy text changed")
        check(s.stop() == 0, "exit code")
        print(f"soak: {N} requests ({n_ok} completed, {n_cancel} cancelled by the client, "
              f"{int(aborted)} aborted in the engine) in {dt:.1f} s; /metrics checked {metric_checks[0]} times")


if __name__ == "__main__":
    try:
        main()
        print("ok    test_server_soak")
    except Exception as e:  # noqa: BLE001
        print(f"FAIL  test_server_soak: {e}")
        sys.exit(1)
