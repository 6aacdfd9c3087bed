#!/usr/bin/env python3
# label: model
"""test_server_speculation.py -- speculative decoding behind `kiln serve`
(issue 8): the admin route switches drafting off and on at run time without
re-initialising the engine, greedy text is the same in every state and equals
a server without speculation, and the counters (route and /metrics) move
only while drafting is on. Also the route's bad inputs: a body that is not an
object with a boolean "enabled" (400 naming the parameter), a server started
without a speculative method (400), and the API key.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, check, metric, run_tests  # noqa: E402

# a prompt that repeats itself, so prompt lookup has something to propose
PROMPT = "the kiln is hot and the kiln is hot and the kiln is hot and the kiln is"


def body(**kw):
    b = {"prompt": PROMPT, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    b.update(kw)
    return b


def text(s):
    r = s.post("/v1/completions", body())
    check(r.status == 200, r)
    return r.json()["choices"][0]["text"]


def state(s, headers=None):
    r = s.get("/admin/speculation", headers=headers)
    check(r.status == 200, r)
    return r.json()


def switch(s, enabled):
    r = s.post("/admin/speculation", {"enabled": enabled})
    check(r.status == 200, r)
    check(r.json()["enabled"] is enabled, r.json())
    return r.json()


def expect_400(r, param, contains):
    check(r.status == 400, f"expected 400, got {r}")
    err = r.json()["error"]
    check(err["param"] == param, err)
    check(contains in err["message"], err)


def test_toggle_at_run_time():
    with Server() as plain:
        ref = text(plain)
        expect_400(plain.post("/admin/speculation", {"enabled": True}), "enabled", "--speculative-method")
        st = state(plain)
        check(st["method"] == "none" and st["enabled"] is False and st["num_speculative_tokens"] == 0, st)
    with Server("--speculative-method", "ngram", "--num-speculative-tokens", "3") as s:
        st = state(s)
        check(st["method"] == "ngram" and st["enabled"] is True and st["num_speculative_tokens"] == 3, st)
        check(text(s) == ref, "speculative greedy text differs from plain")
        on = state(s)
        check(on["draft_tokens_total"] > 0 and on["verification_steps_total"] > 0, on)
        check(0 <= on["acceptance_rate"] <= 1, on)
        _, m = s.metrics()
        check(metric(m, "vllm:spec_decode_num_draft_tokens_total") == on["draft_tokens_total"], "metrics drafts")
        # off: same text, no drafts
        switch(s, False)
        check(text(s) == ref, "text with speculation switched off differs")
        off = state(s)
        check(off["draft_tokens_total"] == on["draft_tokens_total"], f"drafted while off: {on} -> {off}")
        # on again: drafting resumes, same text
        switch(s, True)
        check(text(s) == ref, "text after switching speculation back on differs")
        again = state(s)
        check(again["draft_tokens_total"] > off["draft_tokens_total"], f"no drafts after re-enabling: {again}")
        # bad bodies
        for b, what in ((b"not json", "not JSON"), (b"[true]", "an array"), (b'{"enabled": "yes"}', "a string"),
                        (b"{}", "no field")):
            expect_400(s.post("/admin/speculation", b), "enabled", "boolean")
        check(state(s)["enabled"] is True, "a rejected body changed the state")
        check(s.get("/admin/speculation").status == 200, "GET")
        check(s.stop() == 0, "exit code")


def test_api_key():
    with Server("--speculative-method", "ngram", "--api-key", "sekret") as s:
        check(s.get("/admin/speculation").status == 401, "GET without the key")
        check(s.post("/admin/speculation", {"enabled": False}).status == 401, "POST without the key")
        st = state(s, headers={"Authorization": "Bearer sekret"})
        check(st["enabled"] is True, st)
        check(s.stop() == 0, "exit code")


if __name__ == "__main__":
    run_tests([test_toggle_at_run_time, test_api_key])
