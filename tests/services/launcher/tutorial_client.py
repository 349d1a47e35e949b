#!/usr/bin/python3
"""The tutorial's client calls, with nothing but Python's standard library:
its health check and the chat request its Chainlit app sends with httpx
(model, messages, temperature, max_tokens, repetition_penalty).

    tutorial_client.py BASE_URL MODEL  -> prints a JSON summary, exits 1 on a mismatch
"""
import json
import sys
import urllib.request


def main():
    base, model = sys.argv[1].rstrip("/"), sys.argv[2]
    with urllib.request.urlopen(base + "/health", timeout=30) as r:
        health_status, health_body = r.status, r.read()
    payload = {
        "model": model,
        "messages": [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "Hello, who are you?"}],
        "temperature": 0.7,
        "max_tokens": 24,
        "repetition_penalty": 1.05,
    }
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        status = r.status
        body = json.loads(r.read())
    choice = body["choices"][0]
    summary = {"health_status": health_status, "health_body": health_body.decode(), "status": status,
               "object": body["object"], "role": choice["message"]["role"],
               "content_is_text": isinstance(choice["message"]["content"], str),
               "finish_reason": choice["finish_reason"], "usage": body["usage"]}
    print(json.dumps(summary))
    ok = (health_status == 200 and health_body == b"" and status == 200 and body["object"] == "chat.completion"
          and choice["message"]["role"] == "assistant" and body["usage"]["completion_tokens"] <= 24)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
