#!/usr/bin/env python3
# label: unit
"""test_server_errors.py -- every bad-input case of issue 6 against a real
`kiln serve --device cpu` on a tiny model: each gets the right status and an
OpenAI error object naming what is wrong; the server never crashes, other
requests keep working, and file descriptors and KV blocks return to their
baseline. Labelled unit (no engine numerics; mostly parsing) so the CI
sanitizer pass runs it against the ASan+UBSan build too.

Cases: 1 not JSON / not an object, 2 invalid UTF-8, \\u0000, lone surrogates,
deep nesting, 3 body size (413), 4 wrong types, 5 ranges, 6 huge max_tokens
and context length, 7 long and 10 MB prompts, 8 empty prompts and ids out of
vocabulary, 9 template errors, 10 stream_options, 11 stop-string limits,
12 unknown model / path / method, 15 KV exhaustion and never-fitting
requests, 16 queue limit, plus auth (--api-key, KILN_API_KEY).
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import SLOW, Server, check, metric, run_tests  # noqa: E402

S = None  # the shared server (llama3-gqa, max_model_len 512)


def expect_error(r, status, param=None, contains=(), code=None):
    check(r.status == status, f"expected {status}, got {r}")
    try:
        body = r.json()
    except ValueError:
        raise AssertionError(f"error body is not JSON: {r.body[:200]!r}")
    err = body.get("error")
    check(isinstance(err, dict), f"no error object: {body}")
    for k in ("message", "type", "param", "code"):
        check(k in err, f"error object lacks {k!r}: {err}")
    check(isinstance(err["message"], str) and err["message"], f"empty message: {err}")
    if param is not None:
        check(err["param"] == param, f"param {err['param']!r}, expected {param!r}: {err}")
    if code is not None:
        check(err["code"] == code, f"code {err['code']!r}, expected {code!r}: {err}")
    for c in ([contains] if isinstance(contains, str) else contains):
        check(c in err["message"], f"{c!r} not in message {err['message']!r}")
    return err


def completion(**kw):
    body = {"prompt": "Hello world", "max_tokens": 4, "temperature": 0}
    body.update(kw)
    return body


# ----------------------------------------------------------------- 1 and 2
def test_not_json():
    r = S.post("/v1/completions", '{"prompt": "hi", "max_tokens": }')
    e = expect_error(r, 400, contains=("line 1", "column"))
    check("byte" in e["message"], e)
    expect_error(S.post("/v1/completions", ""), 400)
    expect_error(S.post("/v1/completions", "[1, 2]"), 400, contains="must be a JSON object, not an array")
    expect_error(S.post("/v1/chat/completions", '"hello"'), 400, contains="JSON object")
    expect_error(S.post("/v1/completions", '{"prompt": "a"} trailing'), 400, contains="column")


def test_bad_strings():
    r = S.post("/v1/completions", b'{"prompt": "caf\xc3\x28 bad", "max_tokens": 2}')
    expect_error(r, 400, contains="byte")
    r = S.post("/v1/completions", b'{"prompt": "\xff\xfe", "max_tokens": 2}')
    expect_error(r, 400)
    r = S.post("/v1/completions", '{"prompt": "a\\u0000b", "max_tokens": 2}')
    expect_error(r, 400, contains="\\u0000")
    r = S.post("/v1/completions", '{"prompt": "a\\ud800b", "max_tokens": 2}')
    expect_error(r, 400, contains="nvalid Unicode")
    r = S.post("/v1/completions", '{"prompt": "a\\udc00", "max_tokens": 2}')
    expect_error(r, 400)
    # a proper surrogate pair is fine
    r = S.post("/v1/completions", '{"prompt": "a\\ud83d\\ude00", "max_tokens": 2}')
    check(r.status == 200, r)


def test_deep_nesting():
    for body in ("[" * 100000 + "]" * 100000, '{"a":' * 100000 + "1" + "}" * 100000,
                 '{"prompt": ' + "[" * 100000, '{"messages": [' + '{"c":' * 50000):
        expect_error(S.post("/v1/completions", body), 400, contains="nesting deeper than")
    check(S.get("/health").status == 200, "server unhealthy after deep nesting")


# --------------------------------------------------------------------- 3
def test_body_limits():
    # a Content-Length over the limit is refused before the body is read
    t0 = time.time()
    out = S.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000000\r\n\r\n{")
    check(out.startswith(b"HTTP/1.1 413"), out[:200])
    body = out.split(b"\r\n\r\n", 1)[1]
    check(b'"request_too_large"' in body and b"limit of" in body, body)
    check(time.time() - t0 < 1.0 * SLOW, "413 was not immediate")
    # a Content-Length too big to parse (libmicrohttpd answers this one itself)
    out = S.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 99999999999999999999999999\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 413"), out[:200])
    # a chunked body is checked while it arrives: buffering stops at the
    # limit (the server runs with --max-body-size 11M)
    chunk = b"x" * (1 << 20)
    req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    req += (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 12 + b"0\r\n\r\n"
    out = S.raw(req, timeout=30)
    check(out.startswith(b"HTTP/1.1 413"), out[:200])
    check(b'"request_too_large"' in out, out[:300])
    # an endless chunked body gets the connection closed
    import socket
    s = socket.create_connection(("127.0.0.1", S.port), timeout=20)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    closed = False
    try:
        for _ in range(200):
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    except OSError:
        closed = True
    s.close()
    check(closed, "server kept reading an endless chunked body (200 MB)")
    check(S.get("/health").status == 200, "unhealthy after big bodies")


# --------------------------------------------------------------------- 4
def test_wrong_types():
    cases = [
        ("/v1/completions", completion(max_tokens="10"), "max_tokens", "integer"),
        ("/v1/completions", completion(max_tokens=2.5), "max_tokens", "fractional"),
        ("/v1/completions", completion(stop=5), "stop", "string"),
        ("/v1/completions", completion(stop=["a", 3]), "stop", "item 1"),
        ("/v1/completions", completion(temperature="hot"), "temperature", "number"),
        ("/v1/completions", completion(n="2"), "n", "integer"),
        ("/v1/completions", completion(stream="yes"), "stream", "boolean"),
        ("/v1/completions", completion(prompt=5), "prompt", "prompt"),
        ("/v1/completions", completion(prompt=[1, "a"]), "prompt", "integer"),
        ("/v1/completions", completion(prompt=["a", 1]), "prompt", "item 1"),
        ("/v1/completions", completion(logprobs=True), "logprobs", "integer"),
        ("/v1/completions", completion(seed="x"), "seed", "integer"),
        ("/v1/completions", completion(stop_token_ids=[1, "2"]), "stop_token_ids", "integer"),
        ("/v1/completions", completion(echo=1), "echo", "boolean"),
        ("/v1/completions", completion(model=7), "model", "string"),
        ("/v1/completions", completion(user=[]), "user", "string"),
        ("/v1/completions", completion(stream=True, stream_options=[]), "stream_options", "object"),
        ("/v1/chat/completions", {"messages": [{"role": 1, "content": "hi"}]}, "messages[0].role", "string"),
        ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, "messages[0].role", "missing"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages", "array"),
        ("/v1/chat/completions", {"messages": ["hi"]}, "messages[0]", "object"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "string"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
         "messages[0].content", "only text"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "logprobs": 1}, "logprobs",
         "boolean"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": "5"},
         "max_completion_tokens", "integer"),
    ]
    for path, body, param, text in cases:
        expect_error(S.post(path, body), 400, param=param, contains=text)


# --------------------------------------------------------------------- 5
def test_ranges():
    cases = [
        (dict(temperature=-1), "temperature", "[0, 2]"),
        (dict(temperature=2.5), "temperature", "[0, 2]"),
        (dict(top_p=0), "top_p", "(0, 1]"),
        (dict(top_p=1.5), "top_p", "(0, 1]"),
        (dict(n=0), "n", "[1, 128]"),
        (dict(n=1000), "n", "[1, 128]"),
        (dict(presence_penalty=3), "presence_penalty", "[-2, 2]"),
        (dict(frequency_penalty=-2.5), "frequency_penalty", "[-2, 2]"),
        (dict(repetition_penalty=0), "repetition_penalty", "(0, 2]"),
        (dict(top_k=-2), "top_k", "[-1,"),
        (dict(min_p=1.5), "min_p", "[0, 1]"),
        (dict(logprobs=21), "logprobs", "[0, 20]"),
        (dict(max_tokens=0), "max_tokens", "at least 1"),
        (dict(max_tokens=-5), "max_tokens", "at least 1"),
        (dict(min_tokens=-1), "min_tokens", "[0,"),
        (dict(stop_token_ids=[512]), "stop_token_ids", "vocabulary [0, 512)"),
    ]
    for kw, param, rng in cases:
        e = expect_error(S.post("/v1/completions", completion(**kw)), 400, param=param, contains=rng)
        check("got" in e["message"] or "at least" in e["message"] or "vocabulary" in e["message"], e)
    e = expect_error(S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                     "logprobs": True, "top_logprobs": 30}), 400,
                     param="top_logprobs", contains="[0, 20]")
    expect_error(S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                 "top_logprobs": 3}), 400, param="top_logprobs")


# --------------------------------------------------------------------- 6
def test_max_tokens_context():
    n = S.post("/tokenize", {"prompt": "Hello world"}).json()["count"]
    r = S.post("/v1/completions", completion(max_tokens=10 ** 9))
    expect_error(r, 400, param="max_tokens", code="context_length_exceeded",
                 contains=("maximum context length is 512 tokens", f"{10**9 + n} tokens", f"{n} in the prompt",
                           "1000000000 for the completion"))
    r = S.post("/v1/completions", completion(max_tokens=1e9))
    expect_error(r, 400, param="max_tokens", contains="maximum context length is 512 tokens")
    r = S.post("/v1/completions", '{"prompt": "Hello world", "max_tokens": 1e400}')
    expect_error(r, 400, param="max_tokens", code="context_length_exceeded",
                 contains=("maximum context length is 512 tokens", "more than 1e308"))
    r = S.post("/v1/completions", '{"prompt": "Hello world", "max_tokens": 123456789012345678901234567890}')
    expect_error(r, 400, param="max_tokens", contains="maximum context length is 512 tokens")
    r = S.post("/v1/completions", completion(max_tokens=512 - n + 1))
    expect_error(r, 400, param="max_tokens", contains=(f"you requested 513 tokens ({n} in the prompt",))
    r = S.post("/v1/completions", completion(max_tokens=512 - n, ignore_eos=True))
    check(r.status == 200 and r.json()["usage"]["completion_tokens"] == 512 - n, r)
    r = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                        "max_completion_tokens": 100000})
    expect_error(r, 400, param="max_completion_tokens", contains="maximum context length is 512 tokens")


def test_kv_not_reserved():
    """A request with a large max_tokens holds only the blocks its tokens use."""
    s = Server(env={"KILN_SERVE_STEP_DELAY_MS": "10"})
    with s:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("POST", "/v1/completions", json.dumps(completion(max_tokens=480, ignore_eos=True, stream=True)),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        seen = 0
        while seen < 8:
            line = r.readline()
            if line.startswith(b"data: {"):
                seen += 1
        st = s.get("/engine_check").json()
        used = st["num_kv_blocks"] - st["num_free_kv_blocks"]
        # prompt (8 tokens) + ~8 generated (+ a few steps of slack) fit in 2 blocks of 16;
        # reserving max_tokens would take 31
        check(1 <= used <= 3, f"{used} KV blocks in use early in a max_tokens=480 request")
        c.close()
        s.wait_idle()


# --------------------------------------------------------------------- 7
def test_long_prompts():
    text = "hello world " * 300  # ~600+ tokens: tokenized, then refused
    n = S.post("/tokenize", {"prompt": text}).json()["count"]
    check(n > 512, f"test prompt is only {n} tokens")
    e = expect_error(S.post("/v1/completions", completion(prompt=text)), 400, param="prompt",
                     code="context_length_exceeded",
                     contains=("maximum context length is 512 tokens", f"prompt has {n} tokens"))
    expect_error(S.post("/v1/completions", completion(prompt=[3 + i % 500 for i in range(600)])), 400,
                 code="context_length_exceeded", contains="600 tokens")
    expect_error(S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": text}]}), 400,
                 param="messages", code="context_length_exceeded", contains="maximum context length is 512")
    big = "The kiln is hot. " * (10 * 1024 * 1024 // 17)  # 10 MB
    for path, body in (("/v1/completions", completion(prompt=big)),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": big}]})):
        t0 = time.time()
        r = S.post(path, body)
        dt = time.time() - t0
        expect_error(r, 400, code="context_length_exceeded", contains="maximum context length is 512 tokens")
        check(dt < 1.0 * SLOW, f"10 MB prompt took {dt:.2f} s to refuse")
    del e


# --------------------------------------------------------------------- 8
def test_empty_and_vocab():
    expect_error(S.post("/v1/completions", completion(prompt="")), 400, param="prompt", contains="empty")
    expect_error(S.post("/v1/completions", completion(prompt=[])), 400, param="prompt", contains="empty")
    expect_error(S.post("/v1/completions", completion(prompt=[[]])), 400, param="prompt", contains="empty")
    expect_error(S.post("/v1/completions", completion(prompt=["a", ""])), 400, param="prompt", contains="empty")
    expect_error(S.post("/v1/completions", {"max_tokens": 3}), 400, param="prompt")
    expect_error(S.post("/v1/chat/completions", {"messages": []}), 400, param="messages", contains="empty")
    expect_error(S.post("/v1/chat/completions", {"max_tokens": 3}), 400, param="messages")
    expect_error(S.post("/v1/completions", completion(prompt=[5, 99999])), 400, param="prompt",
                 contains=("99999", "vocabulary [0, 512)"))
    expect_error(S.post("/v1/completions", completion(prompt=[5, -1])), 400, param="prompt")
    expect_error(S.post("/v1/completions", completion(prompt=[[5], [512]])), 400, param="prompt",
                 contains="512")
    expect_error(S.post("/detokenize", {"tokens": [1, 100000]}), 400, param="tokens")


# --------------------------------------------------------------------- 9
def test_template_error():
    with Server(model="llama2-mha") as s2:
        r = s2.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"},
                                                          {"role": "user", "content": "b"}]})
        expect_error(r, 400, param="messages", contains="Conversation roles must alternate")
        r = s2.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "max_tokens": 3})
        check(r.status == 200, r)
        check(s2.stop() == 0, "llama2 server did not exit 0")


# -------------------------------------------------------------------- 10, 11
def test_stream_options_and_stops():
    expect_error(S.post("/v1/completions", completion(stream_options={"include_usage": True})), 400,
                 param="stream_options", contains="stream")
    expect_error(S.post("/v1/completions", completion(stream=False, stream_options={"include_usage": True})), 400,
                 param="stream_options")
    expect_error(S.post("/v1/completions", completion(stop=[f"s{i}" for i in range(17)])), 400, param="stop",
                 contains="at most 16")
    expect_error(S.post("/v1/completions", completion(stop=["x" * 300])), 400, param="stop",
                 contains=("300 bytes", "256"))
    expect_error(S.post("/v1/completions", completion(stop=[""])), 400, param="stop", contains="empty")
    r = S.post("/v1/completions", completion(stop=[f"s{i}" for i in range(16)]))
    check(r.status == 200, r)


# -------------------------------------------------------------------- 12
def test_not_found_and_methods():
    expect_error(S.post("/v1/completions", completion(model="gpt-4")), 404, param="model", code="model_not_found",
                 contains="gpt-4")
    expect_error(S.post("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "a"}]}),
                 404, code="model_not_found")
    expect_error(S.get("/v2/nothing"), 404, contains="/v2/nothing")
    expect_error(S.post("/v1/embeddings", {}), 404)
    r = S.get("/v1/completions")
    expect_error(r, 405, contains="POST")
    check(r.headers.get("allow") == "POST", r.headers)
    expect_error(S.request("DELETE", "/health"), 405)
    expect_error(S.request("PUT", "/v1/models"), 405)
    check(S.get("/ping").status == 200 and S.post("/ping", "").status == 200, "ping")


# -------------------------------------------------------------------- 15
def test_kv_exhaustion():
    # 8 blocks x 16 tokens = 128 tokens of KV for the whole server
    with Server("--num-kv-blocks", "8", "--block-size", "16") as s:
        n = s.post("/tokenize", {"prompt": "Hello world"}).json()["count"]
        results = [None] * 6

        def one(i):
            results[i] = s.post("/v1/completions", completion(max_tokens=60, ignore_eos=True, seed=i,
                                                              temperature=0.8))
        ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for r in results:
            check(r.status == 200, r)
            j = r.json()
            check(j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 60, j)
        _, m = s.metrics()
        check(metric(m, "vllm:num_preemptions_total") > 0, "6 x 68 tokens in a 128-token cache without preemption")
        # a request that can never fit: 400 before anything is queued
        expect_error(s.post("/v1/completions", completion(max_tokens=128 - n + 1)), 400, param="max_tokens",
                     code="kv_cache_exceeded", contains="holds 128 tokens")
        expect_error(s.post("/v1/completions", completion(prompt=list(range(3, 203)))), 400, param="prompt",
                     code="kv_cache_exceeded")
        r = s.post("/v1/completions", completion(max_tokens=128 - n, ignore_eos=True))
        check(r.status == 200 and r.json()["usage"]["completion_tokens"] == 128 - n, r)
        s.wait_idle()
        check(s.stop() == 0, "exit code")


# -------------------------------------------------------------------- 16
def test_queue_limit():
    with Server("--max-num-seqs", "1", "--max-queued-requests", "2",
                env={"KILN_SERVE_STEP_DELAY_MS": "20"}) as s:
        import http.client
        conns = []

        def start(max_tokens):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            c.request("POST", "/v1/completions",
                      json.dumps(completion(max_tokens=max_tokens, ignore_eos=True, stream=True)),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            check(r.status == 200, f"stream refused: {r.status}")
            conns.append((c, r))
            return r
        r0 = start(60)  # runs (~1.2 s)
        while not r0.readline().startswith(b"data: {"):
            pass
        start(4)
        start(4)  # two queued behind it
        r = s.post("/v1/completions", completion())
        e = expect_error(r, 503, code="server_busy", contains=("limit 2",))
        check(r.headers.get("retry-after") == "1", r.headers)
        del e
        for c, rr in conns:
            rr.read()
            c.close()
        s.wait_idle()
        check(s.post("/v1/completions", completion()).status == 200, "not accepting after the queue drained")
        _, m = s.metrics()
        check(metric(m, "kiln:requests_rejected_total", reason="queue_full") == 1, "rejection not counted")


# ------------------------------------------------------------------- auth
def test_api_key():
    for args, env in ((("--api-key", "sekrit"), None), ((), {"KILN_API_KEY": "sekrit"})):
        with Server(*args, env=env) as s:
            check(s.get("/health").status == 200, "/health needs no key")
            check(s.get("/ping").status == 200, "/ping needs no key")
            for path in ("/v1/models", "/metrics", "/engine_check", "/version"):
                expect_error(s.get(path), 401, code="invalid_api_key")
                expect_error(s.get(path, headers={"Authorization": "Bearer wrong"}), 401)
                check(s.get(path, headers={"Authorization": "Bearer sekrit"}).status == 200, path)
            r = s.post("/v1/completions", completion())
            expect_error(r, 401)
            check(r.headers.get("www-authenticate") == "Bearer", r.headers)
            expect_error(s.post("/v1/completions", completion(), headers={"Authorization": "sekrit"}), 401)
            expect_error(s.post("/v1/completions", completion(), headers={"Authorization": "Bearer sekri"}), 401)
            expect_error(s.post("/v1/completions", completion(), headers={"Authorization": "Bearer sekritt"}), 401)
            r = s.post("/v1/completions", completion(), headers={"Authorization": "Bearer sekrit"})
            check(r.status == 200, r)
            expect_error(s.post("/tokenize", {"prompt": "a"}), 401)


def test_port_in_use():
    import subprocess
    from server_util import BIN, model_dir
    r = subprocess.run([BIN, "serve", "--model", model_dir(), "--device", "cpu", "--port", str(S.port)],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and "Address already in use" in r.stderr, (r.returncode, r.stderr[-300:]))


# ------------------------------------------------------------ after all
def test_still_healthy():
    """After everything above: healthy, idle, fds at baseline, output unchanged."""
    check(S.alive(), "server died")
    check(S.get("/health").status == 200, "unhealthy")
    S.wait_idle()
    r = S.post("/v1/completions", completion(max_tokens=8))
    check(r.status == 200 and r.json()["choices"][0]["text"] == BASE_TEXT, "greedy output changed")
    deadline = time.time() + 5
    while S.fds() > FD_BASE and time.time() < deadline:
        time.sleep(0.05)
    check(S.fds() <= FD_BASE, f"fds {S.fds()} > baseline {FD_BASE}")
    check(S.stop() == 0, f"exit code {S.p.returncode}\n{S.log_tail()}")


def main():
    global S, BASE_TEXT, FD_BASE
    S = Server("--max-body-size", "11M")
    try:
        r = S.post("/v1/completions", completion(max_tokens=8))
        check(r.status == 200, r)
        BASE_TEXT = r.json()["choices"][0]["text"]
        time.sleep(0.2)
        FD_BASE = S.fds()
        run_tests([test_not_json, test_bad_strings, test_deep_nesting, test_body_limits, test_wrong_types,
                   test_ranges, test_max_tokens_context, test_kv_not_reserved, test_long_prompts,
                   test_empty_and_vocab, test_template_error, test_stream_options_and_stops,
                   test_not_found_and_methods, test_kv_exhaustion, test_queue_limit, test_api_key,
                   test_port_in_use, test_still_healthy])
    finally:
        if S.p.poll() is None or S.p.returncode != 0:
            print("---- server log tail ----\n" + S.log_tail(), file=sys.stderr)
        S.close()


if __name__ == "__main__":
    main()
