#!/usr/bin/env python3
"""What the worker and gateway did between two metric snapshots (tools/bench/serve-metrics.sh).

usage: serve_step_report.py LABEL BEFORE AFTER WALL_SECONDS [TIME_SCALE]

With STEP_REPORT_JSONL=FILE in the environment, the figures are also appended to FILE as one
JSON object.

TIME_SCALE (default 1): the instant backend's emulated steps ran that many times slower than
the device they model (tools/bench/run-serve-emulated), so every time is divided by it and
reported as device-equivalent; CPU shares stay over the wall time.
"""
import os, re, sys
label, before, after, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
scale = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
def read(path):
    values = {}
    for line in open(path):
        m = re.match(r'^(ernie_(?:step_\w+_(?:sum|count)|backend_steps_total|prefix_cache_\w+_total))(\{[^}]*\})? ([0-9.e+-]+)$', line)
        if m:
            name = m.group(1) + (re.sub(r'model_name="[^"]*",?', '', m.group(2) or '')).replace('{}', '')
            values[name] = float(m.group(3))
    return values
a, b = read(before), read(after)
d = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in b}
steps = d.get('ernie_step_duration_seconds_count', 0.0)
if steps <= 0:
    print(f"worker steps at {label}: none"); sys.exit(0)
mode = lambda m: int(d.get('ernie_backend_steps_total{mode="%s"}' % m, 0))
print(f"worker steps at {label}: {int(steps)} steps, {d['ernie_step_tokens_sum'] / steps:.1f} tokens/step, "
      f"{1000 * d['ernie_step_duration_seconds_sum'] / steps / scale:.3f} ms/step, of which "
      f"{1000 * d.get('ernie_step_model_seconds_sum', 0.0) / steps / scale:.3f} ms in the model; "
      f"{100 * d['ernie_step_duration_seconds_sum'] / wall:.0f}% of the benchmark's duration in steps; "
      f"graph replays {mode('graph_replay')}, captures {mode('graph_capture')}, eager {mode('eager')}; "
      f"prefix-cache hits {int(d.get('ernie_prefix_cache_hits_tokens_total', 0))} of "
      f"{int(d.get('ernie_prefix_cache_queries_tokens_total', 0))} prompt tokens")
# Time to first token at each tier over the run (histogram deltas; the median interpolated inside
# its bucket): the worker's (arrival at the engine -> first token, of which queue time before the
# first step), the gateway's (HTTP request -> first token written; of which the prompt's tokenization
# and the worker stream's wait for its first tokens); the client's is ernie-bench's.
def buckets(path, name):
    out = {}
    for line in open(path):
        m = re.match(r'^%s_bucket\{(?:[^}]*,)?le="([^"]+)"[^}]*\} ([0-9.e+-]+)$' % name, line)
        if m:
            le = float('inf') if m.group(1) == '+Inf' else float(m.group(1))
            out[le] = out.get(le, 0.0) + float(m.group(2))
    return out
def median_ms(name, before_path, after_path):
    a, b = buckets(before_path, name), buckets(after_path, name)
    delta = sorted((le, b[le] - a.get(le, 0.0)) for le in b)
    if not delta or delta[-1][1] <= 0:
        return None
    half, lo, below = delta[-1][1] / 2, 0.0, 0.0
    for le, count in delta:
        if count >= half:
            if le == float('inf'):
                return 1000 * lo / scale
            return 1000 / scale * (lo + (le - lo) * (half - below) / max(count - below, 1e-9))
        lo, below = le, count
    return None
def mean_ms(name, before_path, after_path):
    def sums(path):
        out = {}
        for line in open(path):
            m = re.match(r'^%s_(sum|count)(?:\{[^}]*\})? ([0-9.e+-]+)$' % name, line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
        return out
    a, b = sums(before_path), sums(after_path)
    count = b.get('count', 0.0) - a.get('count', 0.0)
    return None if count <= 0 else 1000 / scale * (b.get('sum', 0.0) - a.get('sum', 0.0)) / count
def fmt(v):
    return "n/a" if v is None else f"{v:.1f} ms"
wb = median_ms('ernie_time_to_first_token_seconds', before, after)
wq = median_ms('ernie_request_queue_time_seconds', before, after)
wq_mean = mean_ms('ernie_request_queue_time_seconds', before, after)
gw = median_ms('ernie_gateway_time_to_first_token_seconds', before + '.gateway', after + '.gateway')
prompt = median_ms('ernie_gateway_prompt_ready_seconds', before + '.gateway', after + '.gateway')
upstream = median_ms('ernie_gateway_worker_first_token_seconds', before + '.gateway', after + '.gateway')
def cpu(path):
    try:
        return {l.split()[0]: float(l.split()[1]) for l in open(path) if l.strip()}
    except OSError:
        return {}
ca, cb = cpu(before + '.cpu'), cpu(after + '.cpu')
busy = ", ".join(f"{n.replace('ernie-', '')} {100 * (cb[n] - ca.get(n, 0.0)) / wall:.0f}%" for n in cb)
# Steps that held the engine loop for more than 10 ms (a graph capture, a first-use shape, a preempted
# engine thread):
# every stream waits for them.
sa, sb = buckets(before, 'ernie_step_duration_seconds'), buckets(after, 'ernie_step_duration_seconds')
long_steps = int((sb.get(float('inf'), 0) - sa.get(float('inf'), 0)) - (sb.get(0.01, 0) - sa.get(0.01, 0)))
print(f"  TTFT p50 by tier at {label}: worker {fmt(wb)} (queue {fmt(wq)}, mean {fmt(wq_mean)}), gateway {fmt(gw)} (prompt ready "
      f"{fmt(prompt)}, worker stream to first tokens {fmt(upstream)}); steps over 10 ms: {long_steps}; "
      f"CPU over the run (100% = one core): {busy}")
if os.environ.get('STEP_REPORT_JSONL'):
    import json, time
    with open(os.environ['STEP_REPORT_JSONL'], 'a') as f:
        f.write(json.dumps({
            'bench': 'serve_step_report', 'label': label, 'time': time.strftime('%Y-%m-%dT%H:%M:%S'),
            'time_scale': scale, 'steps': int(steps), 'tokens_per_step': d['ernie_step_tokens_sum'] / steps,
            'ms_per_step': 1000 * d['ernie_step_duration_seconds_sum'] / steps / scale,
            'p50_ms': {'worker_ttft': wb, 'worker_queue': wq, 'gateway_ttft': gw, 'prompt_ready': prompt,
                       'worker_stream_first_tokens': upstream},
            'worker_queue_mean_ms': wq_mean,
            'cpu_percent': {n: 100 * (cb[n] - ca.get(n, 0.0)) / wall for n in cb}}) + '\n')
