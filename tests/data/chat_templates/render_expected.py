#!/usr/bin/python3
"""Renders every chat template case and language case with the real Jinja2,
configured exactly as Hugging Face transformers' apply_chat_template
configures it, and writes expected.json for the C++ tests to compare against
byte for byte.

Run with Debian's python3 (it has python3-jinja2 3.1.2):
    /usr/bin/python3 tests/data/chat_templates/render_expected.py
"""
import datetime
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


def make_environment():
    # transformers' _compile_jinja_template (AssistantTracker's {% generation %}
    # is left out: our renderer does not support it).
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, context):
    """Returns {"output": text} or {"error": message, "error_type": name}."""
    try:
        return {"output": env.from_string(source).render(**context)}
    except jinja2.exceptions.TemplateError as e:
        kind = "TemplateError" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
        return {"error": str(e), "error_type": kind}
    except Exception as e:  # TypeError and friends from Python operators
        return {"error": str(e), "error_type": type(e).__name__}


def hf_context(case, special_tokens, template_kwargs):
    # The order of apply_chat_template's render(messages=..., tools=...,
    # documents=..., add_generation_prompt=..., **special_tokens, **kwargs).
    context = {
        "messages": case["messages"],
        "tools": case.get("tools"),
        "documents": None,
        "add_generation_prompt": case["add_generation_prompt"],
    }
    context.update(special_tokens)
    context.update(template_kwargs)
    context.update(case.get("kwargs", {}))
    return context


def main():
    env = make_environment()
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    with open(os.path.join(HERE, "special_tokens.json"), encoding="utf-8") as f:
        special = json.load(f)
    with open(os.path.join(HERE, "language_cases.json"), encoding="utf-8") as f:
        language_cases = json.load(f)

    template_results = []
    for template_name in cases["templates"]:
        with open(os.path.join(HERE, "templates", template_name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        for case in cases["cases"]:
            if "templates" in case and template_name not in case["templates"]:
                continue
            context = hf_context(case, special[template_name], cases["template_kwargs"].get(template_name, {}))
            result = {"template": template_name, "case": case["name"], "context": context}
            result.update(render(env, source, context))
            template_results.append(result)

    language_results = []
    for case in language_cases:
        result = {"name": case["name"]}
        result.update(render(env, case["template"], case["context"]))
        language_results.append(result)

    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2_version": jinja2.__version__, "template_cases": template_results,
                   "language_cases": language_results}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in r for r in template_results + language_results)
    print(f"wrote {len(template_results)} template cases and {len(language_results)} language cases "
          f"({errors} expected errors) with jinja2 {jinja2.__version__}")


if __name__ == "__main__":
    main()
