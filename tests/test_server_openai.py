#!/usr/bin/env python3
# label: model
"""test_server_openai.py -- the official `openai` Python client against a
real `kiln serve --device cpu` on a tiny model: completions and chat,
streaming and not, n > 1, several prompts, stop strings across token
boundaries (nothing of them leaks), stop_token_ids, logprobs, echo, seeds,
usage and finish_reason; greedy output equals `kiln generate --json` for the
same prompt. The openai package comes from the venv scripts/setup.sh makes.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import BIN, Server, check, model_dir, require_python, run_tests  # noqa: E402

require_python("openai")
import openai  # noqa: E402

S = None
C = None  # openai.OpenAI client
MODEL = None
PROMPT = "The kiln is hot and"


def generate(prompt=None, ids=None, max_tokens=24, extra=()):
    """`kiln generate --json` (greedy) for one prompt."""
    cmd = [BIN, "generate", "--model", model_dir(), "--device", "cpu", "--threads", "1", "--json",
           "--max-tokens", str(max_tokens), *extra]
    cmd += ["--prompt", prompt] if prompt is not None else ["--prompt-ids", ",".join(map(str, ids))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"kiln generate failed: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_models():
    ms = C.models.list()
    ids = [m.id for m in ms.data]
    check(ids == [MODEL], ids)
    check(ms.data[0].max_model_len == 512, ms.data[0])


def test_completion_greedy_equals_generate():
    ref = generate(PROMPT, max_tokens=24)
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=24, temperature=0)
    check(r.object == "text_completion" and r.id.startswith("cmpl-"), r)
    ch = r.choices[0]
    check(ch.text == ref["text"], f"server {ch.text!r} != generate {ref['text']!r}")
    check(ch.finish_reason == ref["finish_reason"], (ch.finish_reason, ref))
    check(r.usage.prompt_tokens == ref["prompt_tokens"], (r.usage, ref))
    check(r.usage.completion_tokens == len(ref["ids"]), (r.usage, ref))
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, r.usage)
    # the same through the legacy route
    raw = S.post("/completion", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0}).json()
    check(raw["choices"][0]["text"] == ref["text"], raw)
    # token ids as the prompt
    ids = S.post("/tokenize", {"prompt": PROMPT}).json()["tokens"]
    r2 = C.completions.create(model=MODEL, prompt=ids, max_tokens=24, temperature=0)
    check(r2.choices[0].text == ref["text"], (r2.choices[0].text, ref["text"]))
    check(S.post("/detokenize", {"tokens": ids}).json()["prompt"].endswith(PROMPT), "detokenize")


def test_completion_stream():
    ref = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=30, temperature=0)
    chunks = list(C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=30, temperature=0, stream=True,
                                       stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    check(text == ref.choices[0].text, (text, ref.choices[0].text))
    fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    check(fins == [ref.choices[0].finish_reason], fins)
    last = chunks[-1]
    check(last.choices == [] and last.usage is not None, last)
    check(last.usage.completion_tokens == ref.usage.completion_tokens and
          last.usage.prompt_tokens == ref.usage.prompt_tokens, (last.usage, ref.usage))
    check(all(c.usage is None for c in chunks[:-1]), "usage on content chunks")
    # without include_usage: no usage chunk
    chunks = list(C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, stream=True))
    check(all(c.choices for c in chunks), "usage chunk without include_usage")


def chat_ids(messages):
    return S.post("/tokenize", {"messages": messages, "add_special_tokens": False}).json()["tokens"]


def test_chat_greedy_and_stream():
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]
    r = C.chat.completions.create(model=MODEL, messages=msgs, max_tokens=20, temperature=0)
    check(r.object == "chat.completion" and r.id.startswith("chatcmpl-"), r)
    msg = r.choices[0].message
    check(msg.role == "assistant" and isinstance(msg.content, str), msg)
    ids = chat_ids(msgs)
    ref = generate(ids=ids, max_tokens=20)
    check(msg.content == ref["text"], f"chat {msg.content!r} != generate {ref['text']!r}")
    check(r.usage.prompt_tokens == len(ids), (r.usage, len(ids)))
    check(r.usage.completion_tokens == len(ref["ids"]), (r.usage, ref))
    chunks = list(C.chat.completions.create(model=MODEL, messages=msgs, max_tokens=20, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    check(chunks[0].choices[0].delta.role == "assistant", chunks[0])
    check(chunks[0].object == "chat.completion.chunk", chunks[0])
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(text == msg.content, (text, msg.content))
    check([c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] ==
          [r.choices[0].finish_reason], "finish")
    check(chunks[-1].usage.total_tokens == r.usage.total_tokens, (chunks[-1].usage, r.usage))
    # content parts are joined; the legacy route works
    r2 = S.post("/chat", {"messages": [{"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
                                       {"role": "user", "content": "Say something."}],
                          "max_tokens": 20, "temperature": 0}).json()
    check(r2["choices"][0]["message"]["content"] == msg.content, r2)
    # default max_tokens for chat: up to the context
    r3 = C.chat.completions.create(model=MODEL, messages=msgs, temperature=0, extra_body={"ignore_eos": True})
    check(r3.usage.prompt_tokens + r3.usage.completion_tokens == 512 and r3.choices[0].finish_reason == "length",
          r3.usage)


def test_n_and_prompts():
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, n=3, temperature=1.0, seed=7)
    check([c.index for c in r.choices] == [0, 1, 2], r.choices)
    texts = [c.text for c in r.choices]
    check(len(set(texts)) > 1, f"n=3 samples are identical: {texts}")
    check(r.usage.completion_tokens == 36 or all(c.finish_reason == "stop" for c in r.choices
                                                 if len(c.text) == 0), r.usage)
    again = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, n=3, temperature=1.0, seed=7)
    check([c.text for c in again.choices] == texts, "seeded n=3 is not reproducible")
    other = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, n=3, temperature=1.0, seed=8)
    check([c.text for c in other.choices] != texts, "a different seed gave the same samples")
    # streaming n=3: every index streams its own text and one finish
    chunks = list(C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, n=3, temperature=1.0, seed=7,
                                       stream=True))
    by = {}
    fin = {}
    for c in chunks:
        for ch in c.choices:
            by[ch.index] = by.get(ch.index, "") + ch.text
            if ch.finish_reason:
                fin[ch.index] = fin.get(ch.index, 0) + 1
    check([by[i] for i in range(3)] == texts, (by, texts))
    check(fin == {0: 1, 1: 1, 2: 1}, fin)
    # several prompts x n: index = prompt * n + i, prompt tokens counted once per prompt
    prompts = [PROMPT, "Hello world"]
    r = C.completions.create(model=MODEL, prompt=prompts, max_tokens=6, n=2, temperature=0)
    check([c.index for c in r.choices] == [0, 1, 2, 3], r.choices)
    single = [C.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0) for p in prompts]
    for i, c in enumerate(r.choices):
        check(c.text == single[i // 2].choices[0].text, (i, c.text, single[i // 2].choices[0].text))
    check(r.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in single), r.usage)
    # chat n=2
    rc = C.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=8, n=2,
                                   temperature=0)
    check(len(rc.choices) == 2 and rc.choices[0].message.content == rc.choices[1].message.content, rc)


def pick_stop(text_bytes, offsets):
    """A stop string starting inside token i and ending inside token i+1."""
    for i in range(len(offsets) - 2):
        a, b, c = offsets[i], offsets[i + 1], offsets[i + 2]
        if b - a >= 2 and c - b >= 1:
            cand = text_bytes[a + 1:b + 1]
            try:
                s = cand.decode()
            except UnicodeDecodeError:
                continue
            if "\ufffd" in s or not s.strip() or text_bytes.find(cand) != a + 1:
                continue
            return s, a + 1
    return None, None


def test_stop_strings():
    base = S.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 40, "temperature": 0, "logprobs": 0,
                                      "ignore_eos": True}).json()["choices"][0]
    tb = base["text"].encode()
    offs = base["logprobs"]["text_offset"]
    check(len(offs) == 40, f"{len(offs)} logprobs entries for 40 tokens")
    stop, at = pick_stop(tb, offs)
    check(stop is not None, f"no cross-token stop candidate in {base['text']!r}")
    want = tb[:at].decode(errors="replace")
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0, stop=[stop, "zzzzq"],
                             extra_body={"ignore_eos": True})
    ch = r.choices[0]
    check(ch.finish_reason == "stop", ch)
    check(ch.text == want, f"stop {stop!r}: got {ch.text!r}, want {want!r}")
    check(stop not in ch.text, "stop string leaked")
    chunks = list(C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0, stop=stop,
                                       stream=True, extra_body={"ignore_eos": True}))
    st = "".join(c.choices[0].text for c in chunks if c.choices)
    check(st == want, f"streamed {st!r}, want {want!r}")
    check(chunks[-1].choices[0].finish_reason == "stop", chunks[-1])
    # the completion stops inside a token: fewer tokens than max_tokens
    check(r.usage.completion_tokens < 40, r.usage)
    # chat: a stop string spanning tokens of the greedy answer
    msgs = [{"role": "user", "content": "Tell me about kilns."}]
    cb = S.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 40, "temperature": 0, "logprobs": True,
                                         "ignore_eos": True}).json()["choices"][0]
    ctext = cb["message"]["content"].encode()
    coffs, pos = [], 0
    for e in cb["logprobs"]["content"]:
        coffs.append(pos)
        pos += len(bytes(e["bytes"]))
    if pos == len(ctext):  # token texts line up with the text: pick a spanning stop
        cstop, cat = pick_stop(ctext, coffs)
    else:
        cstop, cat = ctext[5:9].decode(errors="ignore"), None
    check(cstop, "no chat stop candidate")
    cat = ctext.find(cstop.encode())
    cwant = ctext[:cat].decode(errors="replace")
    rc = C.chat.completions.create(model=MODEL, messages=msgs, max_tokens=40, temperature=0, stop=[cstop],
                                   extra_body={"ignore_eos": True})
    check(rc.choices[0].message.content == cwant and rc.choices[0].finish_reason == "stop",
          (rc.choices[0].message.content, cwant))
    sc = list(C.chat.completions.create(model=MODEL, messages=msgs, max_tokens=40, temperature=0, stop=[cstop],
                                        stream=True, extra_body={"ignore_eos": True}))
    check("".join(c.choices[0].delta.content or "" for c in sc if c.choices) == cwant, "chat stream stop")


def test_stop_token_ids_and_eos():
    ref = generate(PROMPT, max_tokens=30, extra=("--ignore-eos",))
    ids = ref["ids"]
    k = next(i for i in range(3, len(ids)) if ids[i] not in ids[:i])
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=30, temperature=0,
                             extra_body={"stop_token_ids": [ids[k]], "ignore_eos": True})
    check(r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == k + 1, (r.choices[0], r.usage, k))
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=100, temperature=0,
                             extra_body={"ignore_eos": True})
    check(r.usage.completion_tokens == 100 and r.choices[0].finish_reason == "length", r.usage)


def test_logprobs_and_echo():
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=10, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    check(len(lp.tokens) == n and len(lp.token_logprobs) == n and len(lp.top_logprobs) == n and
          len(lp.text_offset) == n, lp)
    for i in range(n):
        tops = lp.top_logprobs[i]
        check(3 <= len(tops) <= 4 and lp.tokens[i] in tops, tops)
        check(abs(max(tops.values()) - lp.token_logprobs[i]) < 1e-4, "greedy token is not the most likely")
        check(lp.token_logprobs[i] <= 0, lp.token_logprobs[i])
    check(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0, lp.text_offset)
    rc = C.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=6,
                                   temperature=0, logprobs=True, top_logprobs=2)
    content = rc.choices[0].logprobs.content
    check(len(content) == rc.usage.completion_tokens, content)
    for e in content:
        check(len(e.top_logprobs) == 2 and abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4, e)
        check(bytes(e.bytes).decode(errors="replace") == e.token, e)
    chunks = list(C.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=6, temperature=0, logprobs=True, top_logprobs=2,
                                            stream=True))
    streamed = [e.token for c in chunks if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content]
    check(streamed == [e.token for e in content], (streamed, content))
    e = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, echo=True)
    plain = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0)
    check(e.choices[0].text == PROMPT + plain.choices[0].text, e.choices[0].text)
    es = list(C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, echo=True,
                                   stream=True))
    check("".join(c.choices[0].text for c in es) == e.choices[0].text, "echo stream")


def test_sampling_params_accepted():
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0.7, top_p=0.9,
                             presence_penalty=0.5, frequency_penalty=0.5, seed=3, user="u1",
                             extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 4,
                                         "some_unknown_field": {"x": 1}})
    check(r.usage.completion_tokens >= 4, r.usage)
    r2 = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0.7, top_p=0.9,
                              presence_penalty=0.5, frequency_penalty=0.5, seed=3, user="u1",
                              extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 4})
    check(r.choices[0].text == r2.choices[0].text, "seeded sampling not reproducible")


def test_metrics_names():
    from server_util import metric
    _, m0 = S.metrics()
    r = C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=7, temperature=0, extra_body={"ignore_eos": True})
    _, m1 = S.metrics()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
                 "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count",
                 "vllm:e2e_request_latency_seconds_count"):
        for labels, _ in m1[name]:
            check(labels.get("model_name") == MODEL, (name, labels))
    d = lambda n, **kw: metric(m1, n, **kw) - metric(m0, n, **kw)  # noqa: E731
    check(d("vllm:prompt_tokens_total") == r.usage.prompt_tokens, "prompt tokens")
    check(d("vllm:generation_tokens_total") == 7, "generation tokens")
    check(d("vllm:request_success_total", finished_reason="length") == 1, "request_success_total{length}")
    check(d("vllm:e2e_request_latency_seconds_count") == 1 and d("vllm:time_to_first_token_seconds_count") == 1,
          "histograms")
    check(d("vllm:inter_token_latency_seconds_count") == 6, "inter-token latencies")
    check(d("kiln:http_responses_total", code="2xx") >= 2, "http responses")


def test_errors_through_client():
    try:
        C.completions.create(model=MODEL, prompt=PROMPT, max_tokens=10 ** 9)
        check(False, "no error")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "maximum context length is 512 tokens" in str(e), e)
        check(e.code == "context_length_exceeded" and e.param == "max_tokens", (e.code, e.param))
    try:
        C.completions.create(model="other", prompt=PROMPT, max_tokens=1)
        check(False, "no error")
    except openai.NotFoundError as e:
        check(e.code == "model_not_found", e)


def main():
    global S, C, MODEL
    S = Server("--served-model-name", "tiny-llama")
    MODEL = "tiny-llama"
    C = openai.OpenAI(base_url=S.base + "/v1", api_key="unused", max_retries=0, timeout=60)
    try:
        run_tests([test_models, test_completion_greedy_equals_generate, test_completion_stream,
                   test_chat_greedy_and_stream, test_n_and_prompts, test_stop_strings, test_stop_token_ids_and_eos,
                   test_logprobs_and_echo, test_sampling_params_accepted, test_metrics_names, test_errors_through_client])
    finally:
        S.close()


if __name__ == "__main__":
    main()
