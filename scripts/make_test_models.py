#!/usr/bin/env python3
"""Make kiln's tiny reference models, tokenizers and golden outputs.

Regenerate everything under tests/data from scratch (CPU only, ~30 s):

    python3 scripts/make_test_models.py --out tests/data

Needs torch, transformers (5.x), tokenizers and safetensors. CI never runs this
script: it only reads the files it writes. Everything is deterministic (fixed
seeds, inline training text), so rerunning it on the same library versions
rewrites byte-identical files.

What it writes (see tests/data/README.md for the file formats):
  models/<name>/        config.json, generation_config.json, model.safetensors
                        (bf16), tokenizer.json, tokenizer_config.json
  golden/<name>.json    fp32 reference (bf16 weights upcast to fp32, eager
                        attention, CPU): first-step logits, 48 greedy tokens and
                        the top1-top2 margin at each greedy step, per prompt
  golden/<name>.text.json   text prompts -> ids -> greedy text (llama3-gqa,
                        llama2-mha)

The script also checks, and fails loudly if any check fails: the manual greedy
loop equals model.generate(do_sample=False); cached greedy equals full
recompute (except dynamic NTK rope, whose HF semantics depend on the cache);
the sliding window is really applied (and its exact extent); llama3 / linear /
dynamic rope scaling really changes the logits; classic-style configs load
identically to the transformers-5 style; tokenizers load with AutoTokenizer,
give the same ids as the raw tokenizers library and round-trip text.
"""

import argparse
import copy
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import transformers
from transformers import (
    AutoConfig,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

N_GREEDY = 48
PROMPT_LENGTHS = [1, 7, 20, 50, 113]

# ---------------------------------------------------------------------------
# Tokenizer training text: fixed, written here so it never depends on the
# Python version or the machine.
# ---------------------------------------------------------------------------
CORPUS = """
A kiln is a thermally insulated chamber, a type of oven, that produces temperatures sufficient to
complete some process, such as hardening, drying, or chemical changes. Kilns have been used for
millennia to turn objects made from clay into pottery, tiles and bricks. Various industries use
rotary kilns for pyroprocessing: to calcinate ores, to calcinate limestone to lime for cement, and
to transform many other materials.
The potter loads the kiln in the morning. She stacks the bowls on the shelves, checks the cones,
and closes the door. The fire is lit slowly at first, because water that is still trapped in the
clay must leave before the temperature rises too fast. If the water turns to steam too quickly,
the pots can crack or even explode. After a few hours the kiln glows a dull red, then orange, then
yellow, and finally a bright white that is hard to look at.
Firing a kiln is a patient job. The potter watches the color of the flame, listens to the roar of
the burners, and reads the small cones that bend when the right heat has been reached. When the
last cone bends, the fire is turned off and the kiln is left to cool for a day or two. Opening the
door too early can shock the glaze and ruin the work of many weeks.
There are many kinds of kilns. A wood kiln burns logs and leaves ash on the pots, which melts into
a natural glaze. A gas kiln gives the potter close control of the atmosphere inside the chamber.
An electric kiln is clean and quiet, and it is the kind most often found in schools and small
studios. Large factories use tunnel kilns, where carts of ware roll slowly through a long hot
tunnel, and the fire never stops.
The word kiln comes from the Old English cylene, which was borrowed from the Latin culina, a
kitchen or cooking stove. In some places the word is pronounced without the final n, as kill.
Modern software engineers borrowed the word too. An inference engine for language models is a
kind of kiln: raw numbers go in, and after a great deal of heat, useful text comes out.
The engine reads a model from disk, loads the weights into memory, and waits for requests. Each
request carries a prompt. The tokenizer turns the prompt into a list of token ids, the scheduler
places the request in a batch, and the model computes the logits of the next token. The sampler
picks one token, the detokenizer turns it back into text, and the loop runs again until a stop
token appears or the maximum number of tokens is reached.
Tests keep the engine honest. A small random model is saved to disk, and a reference
implementation computes the expected logits and the greedy continuation of several prompts. The
engine must reproduce them to within a tiny error. If it does not, something is wrong: a rotation
applied to the wrong half of a head, a norm with the wrong epsilon, a mask that lets a token see
the future, or a cache block that was freed while it was still in use.
Numbers matter as well: 1, 2, 3, 10, 42, 100, 256, 1024, 4096, 65536 and 3.14159 all appear in
the logs. Version 2.0 was released on 2024-05-01 at 09:30, and version 2.1 followed 3 weeks later.
Questions people ask: What is the temperature? Why did the pot crack? How long does it take to
cool? Where is the cone? Who lit the fire? Can we open it now? No, not yet. Wait until tomorrow.
"The glaze is perfect," she said. "It's the best firing we've had this year, and I'll show it
to everyone." They'd all hoped for it; we're glad it worked, and you're welcome to come and see.
Some simple code: for i in range(10): print(i * i). if x > 0 and y < 5: return x + y else: return 0.
def add(a, b): return a + b  # add two numbers
Lists, tables and lines: - first item - second item - third item; a | b | c; key = value; path/to/file.txt.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. How vexingly
quick daft zebras jump! Sphinx of black quartz, judge my vow. The five boxing wizards jump quickly.
"""

# Extra specials of each tokenizer family, in id order.
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
SP_SPECIALS = ["<unk>", "<s>", "</s>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PHI3_SPECIALS = ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"]

# Split regexes (as in the real Llama 3 and Qwen2 tokenizer.json files).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
MISTRAL_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
PHI3_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

# Texts for tokenizer round trips and the *.text.json goldens. They exercise
# in-domain words, unknown words, digits, punctuation, repeated spaces,
# newlines, non-ASCII (byte fallback for the SentencePiece-style tokenizers).
TEXTS = [
    "The potter loads the kiln in the morning.",
    "Hello world! How vexingly quick daft zebras jump?",
    "Numbers: 12345 and 3.14159, version 2.1 (2024-05-01).",
    "  two leading spaces,\ttab, and\nnew lines\n\nend",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u2014 \u65e5\u672c\u8a9e \U0001f525 kiln",
]
CHAT_MESSAGES = [
    {"role": "system", "content": "You are a careful potter."},
    {"role": "user", "content": "How long does the kiln take to cool?"},
]


def fail(msg):
    print("CHECK FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def corpus_lines():
    return [line for line in CORPUS.strip().split("\n")]


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------
def _finish(tok_json, model_extra=None, drop_added=None):
    """Edit a trained tokenizer's JSON and load it back."""
    j = json.loads(tok_json)
    if model_extra:
        j["model"].update(model_extra)
    if drop_added is not None:
        j["added_tokens"] = [t for t in j["added_tokens"] if t["content"] not in drop_added]
    return Tokenizer.from_str(json.dumps(j))


def build_byte_level(vocab_size, specials_first, specials_last, split_regex, ignore_merges, nfc):
    """Byte-level BPE (GPT-2 / Llama 3 / Qwen2 style)."""
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(specials_last),
        min_frequency=1,
        show_progress=False,
        special_tokens=list(specials_first),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    tok = _finish(tok.to_str(), {"ignore_merges": ignore_merges})
    if specials_last:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials_last])
    check(tok.get_vocab_size() == vocab_size, f"byte-level vocab {tok.get_vocab_size()} != {vocab_size}")
    return tok


def build_llama3_tokenizer(vocab_size):
    tok = build_byte_level(vocab_size, LLAMA3_SPECIALS, [], LLAMA3_SPLIT, ignore_merges=True, nfc=False)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                special_tokens=[("<|begin_of_text|>", 0)],
            ),
        ]
    )
    return tok


def build_qwen2_tokenizer(vocab_size):
    tok = build_byte_level(vocab_size, [], QWEN2_SPECIALS, QWEN2_SPLIT, ignore_merges=False, nfc=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def build_sp_tokenizer(vocab_size, style, specials_last=(), bos=True):
    """SentencePiece-style BPE with byte fallback (Llama 2 / Mistral / Phi-3).

    style "normalizer": Prepend("▁") + Replace(" ", "▁") normalizer, no
    pre-tokenizer (the classic Llama 2 tokenizer.json).
    style "metaspace": no normalizer, Metaspace(prepend_scheme="first",
    split=False) pre-tokenizer (newer conversions, e.g. Mistral).
    """
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    # Training splits words at spaces (like sentencepiece's split_by_whitespace).
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(specials_last),
        min_frequency=1,
        show_progress=False,
        special_tokens=SP_SPECIALS + byte_tokens,
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    # Byte tokens are ordinary vocab entries in real Llama 2 files, not added tokens.
    tok = _finish(tok.to_str(), {"byte_fallback": True, "fuse_unk": True}, drop_added=set(byte_tokens))
    if style == "normalizer":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.pre_tokenizer = None
    else:
        tok.normalizer = None
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", 1)]
        )
    if specials_last:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials_last])
    check(tok.get_vocab_size() == vocab_size, f"sp vocab {tok.get_vocab_size()} != {vocab_size}")
    for i, s in enumerate(SP_SPECIALS + byte_tokens):
        check(tok.token_to_id(s) == i, f"sp token {s} not at id {i}")
    return tok


def tokenizer_files(kind, vocab_size):
    """Returns (tokenizers.Tokenizer, tokenizer_config dict, special ids, bos id, eos ids)."""
    if kind == "llama3":
        tok = build_llama3_tokenizer(vocab_size)
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": True,
            "add_eos_token": False,
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|eot_id|>",
            "clean_up_tokenization_spaces": False,
            "model_max_length": 131072,
            "chat_template": LLAMA3_CHAT_TEMPLATE,
        }
        specials, bos, eos = LLAMA3_SPECIALS, "<|begin_of_text|>", ["<|end_of_text|>", "<|eot_id|>"]
    elif kind in ("llama2", "mistral"):
        tok = build_sp_tokenizer(vocab_size, "normalizer" if kind == "llama2" else "metaspace")
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": True,
            "add_eos_token": False,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "clean_up_tokenization_spaces": False,
            "legacy": False,
            "model_max_length": 4096,
            "chat_template": LLAMA2_CHAT_TEMPLATE if kind == "llama2" else MISTRAL_CHAT_TEMPLATE,
        }
        specials, bos, eos = SP_SPECIALS, "<s>", ["</s>"]
    elif kind == "qwen2":
        tok = build_qwen2_tokenizer(vocab_size)
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "clean_up_tokenization_spaces": False,
            "model_max_length": 32768,
            "chat_template": CHATML_TEMPLATE,
        }
        specials, bos, eos = QWEN2_SPECIALS, None, ["<|im_end|>", "<|endoftext|>"]
    elif kind == "phi3":
        tok = build_sp_tokenizer(vocab_size, "normalizer", specials_last=PHI3_SPECIALS, bos=False)
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": False,
            "add_eos_token": False,
            "bos_token": "<s>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "unk_token": "<unk>",
            "clean_up_tokenization_spaces": False,
            "legacy": False,
            "model_max_length": 4096,
            "chat_template": PHI3_CHAT_TEMPLATE,
        }
        specials = SP_SPECIALS + PHI3_SPECIALS
        bos, eos = "<s>", ["<|endoftext|>", "<|assistant|>", "<|end|>"]
    else:
        raise ValueError(kind)
    special_ids = sorted(tok.token_to_id(s) for s in specials)
    bos_id = tok.token_to_id(bos) if bos else None
    eos_ids = [tok.token_to_id(e) for e in eos]
    return tok, cfg, special_ids, bos_id, eos_ids


def check_tokenizer(model_dir, raw):
    """AutoTokenizer loads the files, agrees with the raw library, round-trips text."""
    hf = AutoTokenizer.from_pretrained(model_dir)
    metaspace = json.loads(raw.to_str()).get("pre_tokenizer") is not None and (
        json.loads(raw.to_str())["pre_tokenizer"]["type"] == "Metaspace"
    )
    check(len(hf) == raw.get_vocab_size(), f"{model_dir}: AutoTokenizer size {len(hf)}")
    texts = TEXTS + [CHAT_MESSAGES[1]["content"]]
    for t in texts:
        ids = hf(t)["input_ids"]
        rids = raw.encode(t).ids
        check(ids == rids, f"{model_dir}: AutoTokenizer ids {ids} != tokenizers ids {rids} for {t!r}")
        plain = hf(t, add_special_tokens=False)["input_ids"]
        back = hf.decode(plain)
        want = t
        if metaspace and t.startswith(" "):
            # Metaspace(prepend_scheme="first") does not prepend "▁" to text that
            # already starts with a space, but the decoder still strips one: a
            # real quirk of Metaspace-style Llama/Mistral tokenizer.json files.
            want = t[1:]
        check(back == want, f"{model_dir}: round trip {t!r} -> {back!r}")
        check(raw.decode(plain, skip_special_tokens=False) == back, f"{model_dir}: decode differs")
    # Special tokens written in text are matched as single tokens.
    for s in hf.all_special_tokens:
        check(hf(s, add_special_tokens=False)["input_ids"] == [hf.convert_tokens_to_ids(s)], f"special {s}")
    rendered = hf.apply_chat_template(CHAT_MESSAGES[1:], tokenize=False, add_generation_prompt=True)
    check(len(rendered) > 0, "chat template renders")
    return hf


# ---------------------------------------------------------------------------
# Model specs
# ---------------------------------------------------------------------------
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    # 64 makes the three llama3 bands all occur with head_dim 16 and theta 5e5:
    # wavelength 6.3 (< 64/4: unscaled), 32.4 (between: smoothed), >= 167
    # (> 64/1: divided by 8).
    "original_max_position_embeddings": 64,
}

COMMON = dict(hidden_act="silu", use_cache=True, attention_bias=False, mlp_bias=False)

SPECS = [
    dict(
        name="llama3-gqa",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama3",
        seed=1001,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=512,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling=dict(LLAMA3_ROPE),
            tie_word_embeddings=False,
        ),
        style="new",
    ),
    dict(
        name="llama2-mha",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama2",
        seed=1002,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=4096,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            tie_word_embeddings=False,
        ),
        style="classic",
        classic_rope_scaling=None,
    ),
    dict(
        name="llama-linear",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama3",
        seed=1003,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            rope_scaling={"rope_type": "linear", "factor": 2.0},
            tie_word_embeddings=False,
        ),
        style="classic",
        # The oldest spelling ("type", not "rope_type"), as in 2023 checkpoints.
        classic_rope_scaling={"type": "linear", "factor": 2.0},
    ),
    dict(
        name="llama-dynamic",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama3",
        seed=1004,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=64,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            rope_scaling={"rope_type": "dynamic", "factor": 2.0},
            tie_word_embeddings=False,
        ),
        style="classic",
        classic_rope_scaling={"rope_type": "dynamic", "factor": 2.0},
    ),
    dict(
        name="llama-tied",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama3",
        seed=1005,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,  # MQA
            max_position_embeddings=512,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            tie_word_embeddings=True,
        ),
        style="new",
    ),
    dict(
        name="qwen2-bias",
        cls=Qwen2ForCausalLM,
        cfg_cls=Qwen2Config,
        tokenizer="qwen2",
        seed=1006,
        config=dict(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            max_window_layers=2,
            use_sliding_window=False,
            sliding_window=None,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            tie_word_embeddings=True,
            hidden_act="silu",
            use_cache=True,
        ),
        style="new",
    ),
    dict(
        name="mistral-swa",
        cls=MistralForCausalLM,
        cfg_cls=MistralConfig,
        tokenizer="mistral",
        seed=1007,
        config=dict(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=4096,
            sliding_window=16,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            tie_word_embeddings=False,
            hidden_act="silu",
            use_cache=True,
        ),
        style="new",
    ),
    dict(
        name="phi3",
        cls=Phi3ForCausalLM,
        cfg_cls=Phi3Config,
        tokenizer="phi3",
        seed=1008,
        config=dict(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=4096,
            original_max_position_embeddings=4096,
            sliding_window=None,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            partial_rotary_factor=1.0,
            tie_word_embeddings=False,
            hidden_act="silu",
            use_cache=True,
        ),
        style="new",
    ),
    dict(
        name="llama3-hd128",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        tokenizer="llama3",
        seed=1009,
        config=dict(
            COMMON,
            vocab_size=512,
            hidden_size=128,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=128,  # explicit: != hidden_size / num_attention_heads
            max_position_embeddings=512,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling=dict(LLAMA3_ROPE),
            tie_word_embeddings=False,
        ),
        style="new",
    ),
]
SHARDED_NAME = "llama3-sharded"
SHARDED_FROM = "llama3-gqa"
SHARD_SIZE = "150KB"

# Weight init: N(0, 0.15) for matrices, N(0, 0.3) for the LM head (the
# embedding when tied), 1 + N(0, 0.1) for norm weights, N(0, 0.1) for biases.
# HF's default 0.02 gives near-equal logits and repetitive greedy loops; these
# give first-step logits with std ~2.4, top-2 margins mostly > 1e-2 and 30-45
# distinct tokens in 48 greedy steps.
WEIGHT_STD = 0.15
HEAD_STD = 0.3


def make_config(spec, tok_ids):
    special_ids, bos_id, eos_ids = tok_ids
    kw = dict(spec["config"])
    # transformers 5 spells rope settings as rope_parameters (with rope_theta inside);
    # it still accepts rope_theta / rope_scaling kwargs and converts them.
    rope = {"rope_type": "default", "rope_theta": kw.pop("rope_theta")}
    if "rope_scaling" in kw:
        rope.update(kw.pop("rope_scaling"))
    if "partial_rotary_factor" in kw:
        rope["partial_rotary_factor"] = kw.pop("partial_rotary_factor")
    kw["rope_parameters"] = rope
    kw["bos_token_id"] = bos_id
    kw["eos_token_id"] = eos_ids if len(eos_ids) > 1 else eos_ids[0]
    if spec["tokenizer"] == "qwen2":
        kw["eos_token_id"] = eos_ids[1]  # Qwen2 base configs: <|endoftext|>
    if spec["tokenizer"] == "phi3":
        kw["pad_token_id"] = eos_ids[0]
    cfg = spec["cfg_cls"](**kw)
    return cfg


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    tied = model.config.tie_word_embeddings
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name == "lm_head.weight" or (tied and name == "model.embed_tokens.weight"):
                p.copy_(HEAD_STD * torch.randn(p.shape, generator=g))
            elif name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(WEIGHT_STD * torch.randn(p.shape, generator=g))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def load_ref(model_dir, cls, **overrides):
    """The reference: bf16 checkpoint upcast to fp32, eager attention, CPU."""
    kw = {}
    if overrides:
        cfg = AutoConfig.from_pretrained(model_dir)
        for k, v in overrides.items():
            setattr(cfg, k, v)
        kw["config"] = cfg
    m = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager", **kw)
    m.eval()
    return m


# ---------------------------------------------------------------------------
# Greedy reference
# ---------------------------------------------------------------------------
def top2_margin(logits):
    v = torch.topk(logits, 2).values
    return (v[0] - v[1]).item()


@torch.no_grad()
def greedy_cached(model, prompt, n):
    """Prefill then one token at a time with the KV cache (what generate does)."""
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values  # a DynamicCache
    logits = out.logits[0, -1].float()
    first = logits.clone()
    toks, margins = [], []
    for step in range(n):
        t = int(torch.argmax(logits))
        toks.append(t)
        margins.append(top2_margin(logits))
        if step == n - 1:
            break
        pos = len(prompt) + step
        out = model(
            input_ids=torch.tensor([[t]]),
            cache=past,  # transformers 5.24 renamed past_key_values -> cache
            position_ids=torch.tensor([[pos]]),
            use_cache=True,
        )
        past = out.past_key_values
        logits = out.logits[0, -1].float()
    return first, toks, margins


@torch.no_grad()
def greedy_recompute(model, prompt, n):
    """No cache: rerun the whole sequence each step."""
    seq = list(prompt)
    toks, margins, all_logits = [], [], []
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
        t = int(torch.argmax(logits))
        toks.append(t)
        margins.append(top2_margin(logits))
        all_logits.append(logits)
        seq.append(t)
    return toks, margins, all_logits


@torch.no_grad()
def hf_generate(model, prompt, n):
    # No EOS stopping: clearing eos in a GenerationConfig passed to generate()
    # is not enough (it is merged with the model's), so clear it on the model.
    model.generation_config.eos_token_id = None
    model.config.eos_token_id = None
    gc = copy.deepcopy(model.generation_config)
    gc.do_sample = False
    gc.max_new_tokens = n
    gc.min_new_tokens = None
    gc.pad_token_id = 0
    gc.temperature = None
    gc.top_p = None
    gc.top_k = None
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    toks = out[0, len(prompt):].tolist()
    check(len(toks) == n, f"generate stopped after {len(toks)} tokens")
    return toks


def agree_until_small_margin(a, b, margins, thr=1e-3):
    """True if token lists agree up to and including the first step whose margin < thr."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return False
        if margins[i] < thr:
            return True
    return len(a) == len(b)


def make_prompts(vocab, special_ids, seed):
    g = torch.Generator().manual_seed(seed)
    allowed = torch.tensor([i for i in range(3, vocab) if i not in set(special_ids)])
    prompts = []
    for n in PROMPT_LENGTHS:
        idx = torch.randint(0, len(allowed), (n,), generator=g)
        prompts.append(allowed[idx].tolist())
    return prompts


def f9(x):
    """Round to 9 significant digits: exact for any fp32 value."""
    return float("%.9g" % x)


def golden_cases(spec, model_dir, prompts, log):
    cls = spec["cls"]
    dynamic = spec["name"] == "llama-dynamic"
    cases = []
    for p in prompts:
        # Fresh model per prompt: HF dynamic rope keeps state across calls.
        m = load_ref(model_dir, cls)
        first, toks, margins = greedy_cached(m, p, N_GREEDY)
        gen = hf_generate(load_ref(model_dir, cls), p, N_GREEDY)
        check(gen == toks, f"{spec['name']}: generate {gen} != manual loop {toks}")
        # Logits of the prompt's last position without any cache.
        m2 = load_ref(model_dir, cls)
        with torch.no_grad():
            nocache = m2(input_ids=torch.tensor([p]), use_cache=False).logits[0, -1].float()
        d0 = (nocache - first).abs().max().item()
        check(d0 < 1e-5, f"{spec['name']}: first logits cache/no-cache differ {d0}")
        rtoks, rmargins, _ = greedy_recompute(load_ref(model_dir, cls), p, N_GREEDY)
        same = agree_until_small_margin(toks, rtoks, margins)
        if dynamic:
            log(f"    len {len(p):3d}: cached vs full-recompute greedy agree: {same} (dynamic NTK; HF semantics = cached)")
        else:
            check(same, f"{spec['name']}: cached greedy {toks} != recompute {rtoks}")
        cases.append(
            {
                "prompt": p,
                "first_logits": [f9(x) for x in first.tolist()],
                "greedy": toks,
                "margins": [f9(x) for x in margins],
            }
        )
        log(
            f"    len {len(p):3d}: min margin {min(margins):.3g}, first-logit std {first.std().item():.3f}, "
            f"distinct greedy tokens {len(set(toks))}"
        )
    return cases


def write_golden(path, name, cases, extra=None):
    head = {"model": name, "dtype": "fp32-from-bf16"}
    if extra:
        head.update(extra)
    parts = [json.dumps(head)[:-1] + ', "cases": [']
    parts.append(",\n".join(json.dumps(c) for c in cases))
    parts.append("]}\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


# ---------------------------------------------------------------------------
# Extra checks
# ---------------------------------------------------------------------------
@torch.no_grad()
def last_logits(model, ids, position_ids=None):
    kw = {}
    if position_ids is not None:
        kw["position_ids"] = torch.tensor([position_ids])
    return model(input_ids=torch.tensor([ids]), use_cache=False, **kw).logits[0, -1].float()


def check_sliding_window(model_dir, prompts, log):
    cfg = AutoConfig.from_pretrained(model_dir)
    W = cfg.sliding_window
    long_p = prompts[-1]
    a = last_logits(load_ref(model_dir, MistralForCausalLM), long_p)
    b = last_logits(load_ref(model_dir, MistralForCausalLM, sliding_window=None), long_p)
    d = (a - b).abs().max().item()
    check(d > 1e-2, f"mistral-swa: window has no effect ({d})")
    short = prompts[1]  # shorter than the window: no effect
    a = last_logits(load_ref(model_dir, MistralForCausalLM), short)
    b = last_logits(load_ref(model_dir, MistralForCausalLM, sliding_window=None), short)
    check(torch.equal(a, b), "mistral-swa: window changes a prompt shorter than the window")
    # Exact extent, with a 1-layer model built from layer 0: the last position
    # sees exactly the W most recent positions (itself included), so running
    # only those W tokens at their original positions gives the same logits,
    # while W-1 tokens do not.
    m1 = load_ref(model_dir, MistralForCausalLM, num_hidden_layers=1)
    L = len(long_p)
    full = last_logits(m1, long_p)
    tail = last_logits(m1, long_p[L - W :], list(range(L - W, L)))
    tail_short = last_logits(m1, long_p[L - W + 1 :], list(range(L - W + 1, L)))
    d_w = (full - tail).abs().max().item()
    d_w1 = (full - tail_short).abs().max().item()
    check(d_w < 1e-5, f"mistral-swa: last {W} tokens do not reproduce logits ({d_w})")
    check(d_w1 > 1e-3, f"mistral-swa: last {W - 1} tokens already reproduce logits ({d_w1})")
    log(
        f"    sliding window {W}: prompt len {L} logits differ from no-window by {d:.3g}; 1-layer check: "
        f"last {W} tokens reproduce (diff {d_w:.2g}), last {W - 1} do not (diff {d_w1:.3g})"
    )


def check_rope_matters(name, model_dir, cls, prompts, log):
    cfg = AutoConfig.from_pretrained(model_dir)
    plain = {"rope_type": "default", "rope_theta": cfg.rope_parameters["rope_theta"]}
    for p in prompts:
        a = last_logits(load_ref(model_dir, cls), p)
        b = last_logits(load_ref(model_dir, cls, rope_parameters=dict(plain)), p)
        d = (a - b).abs().max().item()
        if name == "llama-dynamic" and len(p) <= cfg.max_position_embeddings:
            check(d == 0.0, f"{name}: dynamic rope changes a prompt within max_position_embeddings ({d})")
        elif len(p) > 1:
            check(d > 1e-3, f"{name}: rope scaling has no effect at length {len(p)} ({d})")
        log(f"    rope scaling vs none, len {len(p):3d}: max |dlogit| {d:.3g}")


def to_classic(model_dir, spec):
    """Rewrite config.json in the pre-5 style: rope_theta top-level, rope_scaling, torch_dtype."""
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters")
    out = {}
    for k, v in cfg.items():
        if k == "dtype":
            out["torch_dtype"] = v
        else:
            out[k] = v
    # Old configs carry no head_dim: readers derive hidden_size / num_attention_heads.
    if out.get("head_dim") == out["hidden_size"] // out["num_attention_heads"]:
        del out["head_dim"]
    out["rope_theta"] = rp["rope_theta"]
    out["rope_scaling"] = spec["classic_rope_scaling"]
    out["transformers_version"] = "4.40.0"
    out = dict(sorted(out.items()))
    write_json(path, out)


def check_weights(model_dir, cls, bf16_state):
    m = load_ref(model_dir, cls)
    sd = m.state_dict()
    for k, v in bf16_state.items():
        check(sd[k].dtype == torch.float32, f"{k} not fp32 in reference")
        check(torch.equal(sd[k], v.float()), f"{k}: reference weight != bf16 checkpoint value")
    # Rope frequencies must be computed in fp32, not rounded through bf16.
    rot = getattr(m.model, "rotary_emb", None)
    if rot is not None:
        check(rot.inv_freq.dtype == torch.float32, "inv_freq not fp32")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/data", help="output folder (default tests/data)")
    ap.add_argument("--only", default=None, help="comma-separated model names (for debugging)")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # same summation order every run
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    out = args.out
    models_dir = os.path.join(out, "models")
    golden_dir = os.path.join(out, "golden")
    only = set(args.only.split(",")) if args.only else None
    if only is None:
        for d in (models_dir, golden_dir):
            shutil.rmtree(d, ignore_errors=True)
    os.makedirs(models_dir, exist_ok=True)
    os.makedirs(golden_dir, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    summary = {}
    for spec in SPECS:
        name = spec["name"]
        if only and name not in only and not (name == SHARDED_FROM and SHARDED_NAME in only):
            continue
        log(f"== {name}")
        mdir = os.path.join(models_dir, name)
        shutil.rmtree(mdir, ignore_errors=True)
        vocab = spec["config"]["vocab_size"]
        raw_tok, tok_cfg, special_ids, bos_id, eos_ids = tokenizer_files(spec["tokenizer"], vocab)

        cfg = make_config(spec, (special_ids, bos_id, eos_ids))
        torch.manual_seed(spec["seed"])
        model = spec["cls"](cfg)
        init_weights(model, spec["seed"])
        model = model.to(torch.bfloat16)
        model.generation_config.bos_token_id = bos_id
        model.generation_config.eos_token_id = eos_ids if len(eos_ids) > 1 else eos_ids[0]
        model.save_pretrained(mdir)
        bf16_state = {k: v.clone() for k, v in model.state_dict().items()}
        raw_tok.save(os.path.join(mdir, "tokenizer.json"))
        write_json(os.path.join(mdir, "tokenizer_config.json"), tok_cfg)
        del model

        # Checkpoint contents.
        with safe_open(os.path.join(mdir, "model.safetensors"), "pt") as f:
            keys = list(f.keys())
            dtypes = {f.get_slice(k).get_dtype() for k in keys}
        check(dtypes == {"BF16"}, f"{name}: dtypes {dtypes}")
        if cfg.tie_word_embeddings:
            check("lm_head.weight" not in keys, f"{name}: tied model has lm_head.weight")
        else:
            check("lm_head.weight" in keys, f"{name}: untied model lacks lm_head.weight")
        if name == "phi3":
            check(any("qkv_proj" in k for k in keys) and any("gate_up_proj" in k for k in keys), "phi3 fused")
        if name == "qwen2-bias":
            check(any(k.endswith("q_proj.bias") for k in keys), "qwen2 bias")

        if spec["style"] == "classic":
            probe = make_prompts(vocab, special_ids, 7)[-1]
            before = last_logits(load_ref(mdir, spec["cls"]), probe)
            rp_before = dict(AutoConfig.from_pretrained(mdir).rope_parameters)
            to_classic(mdir, spec)
            rp_after = dict(AutoConfig.from_pretrained(mdir).rope_parameters)
            rp_after.pop("type", None)  # transformers keeps the legacy key next to rope_type
            after = last_logits(load_ref(mdir, spec["cls"]), probe)
            check(rp_before == rp_after, f"{name}: classic config parses to {rp_after}, not {rp_before}")
            check(torch.equal(before, after), f"{name}: classic config changes logits")
            log(f"    classic config.json loads identically: rope_parameters {rp_after}")

        check_weights(mdir, spec["cls"], bf16_state)
        check_tokenizer(mdir, raw_tok)

        prompts = make_prompts(vocab, special_ids, spec["seed"])
        if name == "mistral-swa":
            check_sliding_window(mdir, prompts, log)
        if name in ("llama3-gqa", "llama3-hd128", "llama-linear", "llama-dynamic"):
            check_rope_matters(name, mdir, spec["cls"], prompts, log)

        cases = golden_cases(spec, mdir, prompts, log)
        write_golden(os.path.join(golden_dir, name + ".json"), name, cases)
        summary[name] = cases

        if name in ("llama3-gqa", "llama2-mha"):
            write_text_golden(os.path.join(golden_dir, name + ".text.json"), name, mdir, spec["cls"], log)

        if name == SHARDED_FROM:
            make_sharded(os.path.join(models_dir, SHARDED_NAME), mdir, spec, cases, bf16_state, log)

    log("done")


def write_text_golden(path, name, mdir, cls, log):
    tok = AutoTokenizer.from_pretrained(mdir)
    cases = []
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        m = load_ref(mdir, cls)
        first, toks, margins = greedy_cached(m, ids, N_GREEDY)
        cases.append(
            {
                "text": text,
                "prompt": ids,
                "greedy": toks,
                "greedy_text": tok.decode(toks),
                "margins": [f9(x) for x in margins],
                "first_logits": [f9(x) for x in first.tolist()],
            }
        )
    chat_text = tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    chat_ids = tok.apply_chat_template(CHAT_MESSAGES, tokenize=True, add_generation_prompt=True)
    if isinstance(chat_ids, dict) or hasattr(chat_ids, "keys"):
        chat_ids = chat_ids["input_ids"]
    chat = {"messages": CHAT_MESSAGES, "add_generation_prompt": True, "text": chat_text, "ids": list(chat_ids)}
    write_golden(path, name, cases, extra={"decode": "tokenizer.decode(greedy), skip_special_tokens=False", "chat": chat})
    log(f"    text golden: {len(cases)} texts + chat template ({len(chat['ids'])} ids)")


def make_sharded(sdir, src_dir, spec, cases, bf16_state, log):
    shutil.rmtree(sdir, ignore_errors=True)
    m = spec["cls"].from_pretrained(src_dir, dtype=torch.bfloat16)
    m.save_pretrained(sdir, max_shard_size=SHARD_SIZE)
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "config.json"):
        shutil.copy(os.path.join(src_dir, f), os.path.join(sdir, f))
    idx_path = os.path.join(sdir, "model.safetensors.index.json")
    check(os.path.exists(idx_path), "sharded: no index")
    with open(idx_path) as f:
        idx = json.load(f)
    shards = sorted(set(idx["weight_map"].values()))
    check(2 <= len(shards) <= 3, f"sharded: {len(shards)} shards")
    check(not os.path.exists(os.path.join(sdir, "model.safetensors")), "sharded: stray single file")
    check_weights(sdir, spec["cls"], bf16_state)
    p = cases[-1]["prompt"]
    a = last_logits(load_ref(sdir, spec["cls"]), p)
    check([f9(x) for x in a.tolist()] == cases[-1]["first_logits"], "sharded logits differ")
    log(f"== {SHARDED_NAME}: {len(shards)} shards {shards}, logits identical to {SHARDED_FROM}")


if __name__ == "__main__":
    main()
