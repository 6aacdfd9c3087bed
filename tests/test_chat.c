// label: unit
/*
 * test_chat.c -- chat templates: every case of the fixture golden.json
 * (rendered by Jinja2 3.1.2 with transformers' settings; error cases must be
 * errors with the same message), extra constructs whose expected output was
 * produced by transformers 5.24 / Jinja2 3.1.6 (_compile_jinja_template +
 * render), template errors with line numbers, sandbox limits, loading from
 * model directories, and concurrent rendering.
 */
#include "chat.h"
#include "kiln.h"
#include "kt.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHATDIR KT_FIXTURES "/chat_templates"

KT_TEST(golden_templates) {
    if (!kiln_path_exists(CHATDIR "/golden.json")) KT_SKIP("fixtures not found at %s", CHATDIR);
    json_error_t e;
    json_t *g = json_load_file(CHATDIR "/golden.json", JSON_ALLOW_NUL, &e);
    KT_REQUIRE(g != NULL);
    size_t i;
    json_t *c;
    int n_ok = 0, n_err = 0;
    json_array_foreach(json_object_get(g, "cases"), i, c) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CHATDIR, json_string_value(json_object_get(c, "template")));
        kiln_chat_template *t = NULL;
        KT_OK(kiln_chat_template_load(path, &t));
        char *msgs = json_dumps(json_object_get(c, "messages"), JSON_COMPACT);
        json_t *extra = json_object();
        json_object_set(extra, "bos_token", json_object_get(c, "bos_token"));
        json_object_set(extra, "eos_token", json_object_get(c, "eos_token"));
        char *ex = json_dumps(extra, JSON_COMPACT);
        char *out = NULL;
        kiln_clear_error();
        kiln_status st = kiln_chat_render(t, msgs, json_is_true(json_object_get(c, "add_generation_prompt")), ex, &out);
        if (json_is_true(json_object_get(c, "ok"))) {
            const char *want = json_string_value(json_object_get(c, "text"));
            KT_CHECKF(st == KILN_OK && !strcmp(out, want), "case %zu (%s): %s", i, path,
                      st ? kiln_last_error() : out);
            n_ok++;
        } else {
            const char *want = json_string_value(json_object_get(c, "error"));
            KT_CHECKF(st == KILN_ERR_TEMPLATE && !strcmp(kiln_last_error(), want), "case %zu (%s): %s / %s", i,
                      path, kiln_status_name(st), kiln_last_error());
            n_err++;
        }
        kiln_free(out);
        free(msgs);
        free(ex);
        json_decref(extra);
        kiln_chat_template_destroy(t);
    }
    KT_CHECK(n_ok > 100 && n_err > 10);
    json_decref(g);
}

static const struct { const char *src, *vars, *want; } jinja_cases[] = {
    {"{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 'a' ~ 1 ~ none }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "7|3|-4|2|3.5|1024|a1None"},
    {"{{ 0.1 + 0.2 }}|{{ 1.0 }}|{{ 1e20 }}|{{ 1.5e-5 }}|{{ 2.675|round(2) }}|{{ 2.5|round }}|{{ 7|round }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "0.30000000000000004|1.0|1e+20|1.5e-05|2.67|2.0|7"},
    {"{{ 'hello world'.title() }}|{{ \"it's-a (test)\"|title }}|{{ 'ABC def'|capitalize }}|{{ '  a b  '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'h\xc3""\xa9""llo'[::-1] }}|{{ 'h\xc3""\xa9""llo'|length }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "Hello World|It's-A (Test)|Abc def|['a', 'b']|['a', 'b', '', 'c']|oll\xc3""\xa9""h|5"},
    {"{{ [1,'a',none,true,2.5] }}|{{ (1,) }}|{{ {'a': \"it's\"} }}|{{ ['b','A','c']|sort }}|{{ [1,2,2,3,1]|unique|list }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "[1, 'a', None, True, 2.5]|(1,)|{'a': \"it's\"}|['A', 'b', 'c']|[1, 2, 3]"},
    {"{% set d = {'a': 1, 'b': 'x'} %}{{ d.items()|list }}|{% for k, v in d|items %}{{k}}={{v}};{% endfor %}|{{ d.get('z', 'dflt') }}|{{ d.z is defined }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "[('a', 1), ('b', 'x')]|a=1;b=x;|dflt|False"},
    {"{% for i in range(4) %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.previtem }}{{ loop.cycle('a','b') }};{% endfor %}{% for i in [] %}x{% else %}empty{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "13TrueFalsea;22FalseFalse0b;31FalseFalse1a;40FalseTrue2b;empty"},
    {"{% for i in range(10) if i is odd %}{{ i }}:{{ loop.length }},{% endfor %}|{% for i in range(9) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "1:5,3:5,5:5,7:5,9:5,|0134"},
    {"{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }};{% endfor %}{{ x }}|{% set ns = namespace(a=0) %}{% for i in [1,2,3] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "12;12;1|6"},
    {"{% macro m(a, b='q') %}<{{a}}|{{b}}|{{ varargs }}>{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}{{ m(3, 4, 5) }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "<1|q|()><1|2|()><3|4|(5,)>"},
    {"{% set users = [{'name':'a','age':30,'admin':true},{'name':'b','age':20}] %}{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|map(attribute='name')|join(',') }}|{{ users|selectattr('age','gt',22)|list|length }}|{{ users|sort(attribute='age')|map(attribute='name')|join }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "['a']|b|1|ba"},
    {"{{ tools|tojson }}|{{ tools[0]|tojson(indent=2) }}|{{ '\xc3""\xa9""\"<'|tojson }}",
     "{\"tools\": [{\"name\": \"f\", \"parameters\": {\"x\": [1, 2.5, null, true]}}], \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "[{\"name\": \"f\", \"parameters\": {\"x\": [1, 2.5, null, true]}}]|{\n  \"name\": \"f\",\n  \"parameters\": {\n    \"x\": [\n      1,\n      2.5,\n      null,\n      true\n    ]\n  }\n}|\"\xc3""\xa9""\\\"<\""},
    {"Line 1\n  {% if true %}\n    inner\n  {% endif %}\nLine 2\n{%- if true %} dash {% endif -%}\n  end\n{# comment #}\nafter\n{% raw %}{{ x }}{% endraw %}\n",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "Line 1\n    inner\nLine 2 dash end\nafter\n{{ x }}"},
    {"{% for m in messages %}{{ m.role }}:{{ m.content|trim }}{% if not loop.last %}\n{% endif %}{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": \"yo\", \"tool_calls\": null}], \"add_generation_prompt\": true}",
     "user:hiassistant:yo"},
    {"{{ x|default('d') }}|{{ none|default('d2', true) }}|{{ 'a\\nb'|indent(2, true) }}|{{ '%s-%d'|format('a', 3) }}|{{ '{}:{name}'.format(1, name='n') }}|{{ 'a' in 'cab' }}|{{ 2 in [1,2] }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "d|d2|  a\n  b|a-3|1:n|True|True"},
    {"{{ bos_token }}{{ eos_token }}|{{ tools is none }}|{{ documents is defined }}|{{ add_generation_prompt }}",
     "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
     "<s></s>|True|True|True"},
    /* Jinja scoping, for-else, generators, lazy errors, str.center (transformers 5.24 / Jinja2 3.1.6) */
    {"{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 5 %}{{ x }}|{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "[]5|[5]"},
    {"{% for i in [1,2] %}{% for j in [1] %}[{{ y }}]{% endfor %}{% set y = i %}{% endfor %}|{% set y = 1 %}{% for i in [1,2] %}[{{ y }}]{% set y = 9 %}{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "[][]|[1][1]"},
    {"{% for i in range(3) %}a{% break %}{% else %}E{% endfor %}|{% for i in range(3) %}{% continue %}{% else %}E{% endfor %}|{% for i in range(3) %}{% if i > 0 %}{% continue %}{% endif %}{% else %}E{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "aE|E|"},
    {"{{ 'y' if messages|selectattr('role', 'eq', 'x') else 'n' }}|{{ messages|selectattr('role', 'eq', 'x')|list|length }}|{{ 3 is odd }}{{ 2.0 is even }}{{ 9 is divisibleby 3.0 }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "y|0|TrueTrueTrue"},
    {"{% set g = 5|map('upper') %}{{ g is iterable }}|{% set h = false|map('upper') %}{{ h|list }}|{{ [1,2]|batch(1)|list }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "True|[]|[[1], [2]]"},
    {"{{ 'abc'|center(8) }}|{{ 'ab'.center(7, '*') }}|{{ [1, 2][] }}|{% for i in [1] %}{% macro k() %}{{ loop.index }}{% endmacro %}{{ k() }}{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true, \"x\": \"xyz\"}",
     "  abc   |***ab**||1"},
};
static const struct { const char *src, *err; } jinja_errors[] = {
    {"{% if x %}\n{% for %}\n", "line 2"},
    {"a\nb\n{{ 1 +* 2 }}", "line 3"},
    {"{% include 'x' %}", "'include' statement is not supported"},
    {"{{ x|nosuchfilter }}", "no filter named 'nosuchfilter'"},
    {"{{ raise_exception('custom message') }}", "custom message"},
    {"{% if true %}", "expected 'elif' or 'else' or 'endif'"},
    {"{{ x.y }}", "'x' is undefined"},
    {"{{ 1 + 'a' }}", "unsupported operand"},
    {"{{ messages[0]['content'] + 1 }}", "can only concatenate str"},
    {"{% if true %}{% break %}{% endif %}", "'break' outside loop"},
    {"{{ u|indent }}", "'u' is undefined"},
    {"{{ 5|indent }}", "unsupported operand type(s) for +=: 'int' and 'str'"},
    {"{{ 'ab' is odd }}", "not all arguments converted"},
    {"{{ []|first|indent }}", "No first item, sequence was empty."},
    {"{{ 5|map('upper')|list }}", "'int' object is not iterable"},
    {"{{ d[1:] }}", "unhashable type: 'slice'"},
};

static kiln_status render_src(const char *src, const char *vars_json, char **out) {
    kiln_chat_template *t = NULL;
    kiln_status st = kiln_chat_template_from_string(src, "test", &t);
    if (st) return st;
    json_t *v = json_loads(vars_json, 0, NULL);
    json_t *msgs = json_incref(json_object_get(v, "messages"));
    if (!msgs) msgs = json_array();
    bool agp = json_is_true(json_object_get(v, "add_generation_prompt"));
    json_object_del(v, "messages");
    json_object_del(v, "add_generation_prompt");
    char *m = json_dumps(msgs, JSON_COMPACT), *x = json_dumps(v, JSON_COMPACT);
    st = kiln_chat_render(t, m, agp, x, out);
    free(m);
    free(x);
    json_decref(msgs);
    json_decref(v);
    kiln_chat_template_destroy(t);
    return st;
}

KT_TEST(jinja_constructs) {
    for (size_t i = 0; i < KILN_ARRAY_LEN(jinja_cases); i++) {
        char *out = NULL;
        kiln_status st = render_src(jinja_cases[i].src, jinja_cases[i].vars, &out);
        KT_CHECKF(st == KILN_OK && !strcmp(out, jinja_cases[i].want), "case %zu: got %s", i,
                  st ? kiln_last_error() : out);
        kiln_free(out);
    }
}

KT_TEST(template_errors) {
    for (size_t i = 0; i < KILN_ARRAY_LEN(jinja_errors); i++) {
        char *out = NULL;
        kiln_clear_error();
        kiln_status st = render_src(jinja_errors[i].src,
                                    "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"d\": {\"a\": 1}}", &out);
        KT_CHECKF(st == KILN_ERR_TEMPLATE && strstr(kiln_last_error(), jinja_errors[i].err), "case %zu: %s: %s", i,
                  kiln_status_name(st), kiln_last_error());
        kiln_free(out);
    }
    /* raise_exception's message is the whole error message */
    char *out = NULL;
    KT_ERR(render_src("{% if messages|length > 0 %}{{ raise_exception('Only ' ~ 1 ~ ' allowed') }}{% endif %}",
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", &out),
           KILN_ERR_TEMPLATE, "Only 1 allowed");
    KT_CHECK(!strcmp(kiln_last_error(), "Only 1 allowed"));
    /* bad input JSON */
    kiln_chat_template *t = NULL;
    KT_OK(kiln_chat_template_from_string("{{ messages }}", "x", &t));
    KT_ERR(kiln_chat_render(t, "{not json", true, NULL, &out), KILN_ERR_INVALID_ARGUMENT, "not valid JSON");
    KT_ERR(kiln_chat_render(t, "{}", true, NULL, &out), KILN_ERR_INVALID_ARGUMENT, "must be a JSON array");
    KT_ERR(kiln_chat_render(t, "[]", true, "[1]", &out), KILN_ERR_INVALID_ARGUMENT, "must be a JSON object");
    kiln_chat_template_destroy(t);
    /* invalid UTF-8 in a template */
    KT_ERR(kiln_chat_template_from_string("a\xff", "x", &t), KILN_ERR_TEMPLATE, "not valid UTF-8");
}

KT_TEST(sandbox_limits) {
    char *out = NULL;
    /* loops: 10^6 iteration budget */
    KT_ERR(render_src("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", &out),
           KILN_ERR_LIMIT, "loop iterations");
    KT_ERR(render_src("{{ range(1000000) }}", "{}", &out), KILN_ERR_TEMPLATE, "Range too big");
    /* output size */
    KT_ERR(render_src("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}", "{}", &out),
           KILN_ERR_LIMIT, "output exceeds");
    /* an empty string or list repeated is empty at once ('' * 2**63-1 used
     * to loop that many times; [] * 9 offset a NULL item array) */
    KT_OK(render_src("{{ '' * 9223372036854775807 }}|{{ ([] * 9223372036854775807)|length }}|{{ 9 * [] }}|{{ () * 3 }}",
                     "{}", &out));
    KT_CHECKF(!strcmp(out, "|0|[]|()"), "got %s", out);
    kiln_free(out);
    /* recursion */
    KT_ERR(render_src("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", &out), KILN_ERR_LIMIT,
           "nesting deeper");
    /* immutable sandbox */
    KT_ERR(render_src("{% set l = [1] %}{{ l.append(2) }}", "{}", &out), KILN_ERR_TEMPLATE, "unsafe");
    KT_ERR(render_src("{{ {}.update({'a': 1}) }}", "{}", &out), KILN_ERR_TEMPLATE, "unsafe");
    KT_OK(render_src("{{ ''.__class__ }}{{ messages.__len__ }}|", "{}", &out));
    KT_CHECK(!strcmp(out, "|"));
    kiln_free(out);
    /* deeply nested expressions are refused, not a stack overflow */
    kiln_buf b = {0};
    kiln_buf_puts(&b, "{{ ");
    for (int i = 0; i < 5000; i++) kiln_buf_puts(&b, "(");
    kiln_buf_puts(&b, "1");
    for (int i = 0; i < 5000; i++) kiln_buf_puts(&b, ")");
    kiln_buf_puts(&b, " }}");
    kiln_chat_template *t = NULL;
    KT_ERR(kiln_chat_template_from_string(b.data, "deep", &t), KILN_ERR_TEMPLATE, "nested too deeply");
    kiln_buf_free(&b);
}

static char tmpdir[256];

static const char *make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/chat_test_XXXXXX", KT_BINARY_DIR);
    if (!mkdtemp(tmpdir)) snprintf(tmpdir, sizeof tmpdir, "/tmp/chat_test_%d", (int)getpid());
    kiln_mkdirs(tmpdir);
    return tmpdir;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *p = kiln_path_join(dir, name);
    kiln_write_file_atomic(p, text, strlen(text));
    free(p);
}

static void rm(const char *dir, const char *name) {
    char *p = kiln_path_join(dir, name);
    unlink(p);
    free(p);
}

KT_TEST(load_from_model_dir) {
    const char *dir = make_tmpdir();
    kiln_chat_template *t = NULL;
    char *out = NULL;
    const char *msgs = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    KT_ERR(kiln_chat_template_load(dir, &t), KILN_ERR_NOT_FOUND, "no chat template");
    /* tokenizer_config.json: a string template and the tokens */
    write_file(dir, "tokenizer_config.json",
               "{\"bos_token\": {\"content\": \"<B>\", \"special\": true}, \"eos_token\": \"<E>\", "
               "\"model_max_length\": 1000000000000000019884624838656, "
               "\"chat_template\": \"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}\"}");
    KT_OK(kiln_chat_template_load(dir, &t));
    KT_OK(kiln_chat_render(t, msgs, false, NULL, &out));
    KT_CHECK(!strcmp(out, "<B>hi<E>"));
    kiln_free(out);
    /* extra variables override the defaults */
    KT_OK(kiln_chat_render(t, msgs, false, "{\"eos_token\": \"</x>\"}", &out));
    KT_CHECK(!strcmp(out, "<B>hi</x>"));
    kiln_free(out);
    kiln_chat_template_destroy(t);
    /* a list of named templates: "default" is used */
    write_file(dir, "tokenizer_config.json",
               "{\"eos_token\": \"<E>\", \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
               "{\"name\": \"default\", \"template\": \"D{{ eos_token }}\"}]}");
    KT_OK(kiln_chat_template_load(dir, &t));
    KT_OK(kiln_chat_render(t, msgs, false, NULL, &out));
    KT_CHECK(!strcmp(out, "D<E>"));
    kiln_free(out);
    kiln_chat_template_destroy(t);
    /* chat_template.jinja wins over tokenizer_config.json; tokens still from the config */
    write_file(dir, "chat_template.jinja", "J{{ eos_token }}{% if add_generation_prompt %}+{% endif %}\n");
    KT_OK(kiln_chat_template_load(dir, &t));
    KT_OK(kiln_chat_render(t, msgs, true, NULL, &out));
    KT_CHECK(!strcmp(out, "J<E>+"));
    kiln_free(out);
    kiln_chat_template_destroy(t);
    /* an explicit file; a broken template names the file and line */
    char *p = kiln_path_join(dir, "chat_template.jinja");
    write_file(dir, "chat_template.jinja", "ok\n{% if %}\n");
    KT_ERR(kiln_chat_template_load(p, &t), KILN_ERR_TEMPLATE, "chat_template.jinja line 2");
    free(p);
    rm(dir, "chat_template.jinja");
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": [{\"name\": \"x\", \"template\": \"T\"}]}");
    KT_ERR(kiln_chat_template_load(dir, &t), KILN_ERR_NOT_FOUND, "default");
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": ");
    KT_ERR(kiln_chat_template_load(dir, &t), KILN_ERR_FORMAT, "invalid JSON");
    rm(dir, "tokenizer_config.json");
    rmdir(dir);
}

typedef struct thr_arg {
    const kiln_chat_template *t;
    int bad;
} thr_arg;

static void *render_many(void *p) {
    thr_arg *a = p;
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        if (kiln_chat_render(a->t, "[{\"role\": \"user\", \"content\": \"hi\"}]", true, "{\"n\": 3}", &out) ||
            strcmp(out, "0:hi|1:hi|2:hi|"))
            a->bad++;
        kiln_free(out);
    }
    return NULL;
}

KT_TEST(concurrent_renders) {
    kiln_chat_template *t = NULL;
    KT_OK(kiln_chat_template_from_string(
        "{% set ns = namespace(s='') %}{% for i in range(n) %}{% set ns.s = ns.s ~ i ~ ':' ~ messages[0].content|upper|lower ~ '|' %}{% endfor %}{{ ns.s }}",
        "conc", &t));
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){t, 0};
        pthread_create(&th[i], NULL, render_many, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        KT_CHECK(args[i].bad == 0);
    }
    kiln_chat_template_destroy(t);
}

KT_MAIN(KT_CASE(golden_templates), KT_CASE(jinja_constructs), KT_CASE(template_errors), KT_CASE(sandbox_limits),
        KT_CASE(load_from_model_dir), KT_CASE(concurrent_renders))
