# Sourced by the serving benchmarks (gpu-serve-bench, run-serve-emulated):
#   snapshot FILE          the worker's and gateway's /metrics and the servers' CPU seconds, now
#   step_report LABEL BEFORE AFTER WALL_SECONDS [TIME_SCALE]
#                          what happened between two snapshots (serve_step_report.py)
# Needs MPORT (the worker's metrics port) and GATEWAY_PORT (default 8000).
# The worker's step metrics around each client run: steps, tokens a step, time a step, of which in
# the model (ernie_step_model_seconds: the rest is the engine's host work), the share of the
# benchmark's duration spent in steps, the CUDA backend's steps by how they ran (graph replays,
# captures, eager launches), and the prefix cache's hits.
# Each snapshot also keeps the gateway's metrics ($1.gateway) and the three servers' CPU seconds
# ($1.cpu: utime + stime of each process, from /proc), so a run's report says where its time to
# first token went (gateway against worker) and which process was busy.
snapshot() {
  curl -s "127.0.0.1:$MPORT/metrics" > "$1"
  curl -s "127.0.0.1:${GATEWAY_PORT:-8000}/metrics" > "$1.gateway"
  local name pid
  : > "$1.cpu"
  for name in ernie-gateway ernie-worker ernie-tokenizer; do
    pid=$(pgrep -x -n "$name") || continue
    awk -v n="$name" -v hz="$(getconf CLK_TCK)" '{print n, ($14 + $15) / hz}' "/proc/$pid/stat" >> "$1.cpu"
  done
}
step_report() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/serve_step_report.py" "$@"
}
