# shellcheck shell=bash
# Sourced by the one-off device call scripts under tools/bench/results/*/ so that each holds only what it
# measures. From the repository root on the device, after `tools/gpu-test pack` here and a run that carries
# [".device/pack"]:
#   source tools/bench/cuda/device-call-lib.sh   # unpacks into $d, sets LD_LIBRARY_PATH, $start, $gpu
#   make_model /tmp/m --shape 0.3b [--awq-group-size 128]    # a config-only checkpoint for --load-format dummy
#   bench LABEL BINARY MODEL BATCHES [FLAGS...]              # one line: batch:device-greedy-step-ms pairs
#   alternate LABEL MODEL BATCHES NAME=BINARY...             # bench, once with each binary in turn (an A/B round)
#   gtest NAME                                               # one line: a packed gtest binary's verdict
#   gemv_k_splits                                            # the int4 GEMV at m = 1 on 8192^2 and 4096 x 14336
#                                                            # by k split (0: its own choice), with the probes
#   knob_sweep LABEL BINARY MODEL BATCHES LIMIT KNOB...      # bench with each "--flag value" KNOB in turn,
#                                                            # the defaults first; stops once $(elapsed) > LIMIT
#   tuning_ab LABEL BINARY MODEL BATCHES                     # --lm-head-gemm-tuning 0 then 1: a line each
#                                                            # (batch: prefill tok/s, step ms), and the tuning
# BENCH_TIMEOUT (seconds, default 120) bounds each bench run: a 256-row 21B-A3B run sets up for over 60 s.
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null); echo "${gpu:-no GPU}"
d=/tmp/ernie-gpu-pack
mkdir -p "$d" && tar -C "$d" -xzf .device/pack/pack.tar.gz || echo "no pack"
export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

elapsed() { echo $(( $(date +%s) - start )); }

make_model() {  # make_model DIR --shape S [FLAGS...]; its log goes to /tmp/setup.out
  "$d/bin/ernie-make-model" "$@" --seed 1 --config-only >> /tmp/setup.out 2>&1 || echo "make_model $1 failed"
}

bench() {  # bench LABEL BINARY MODEL BATCHES [FLAGS...]; column 4 of the bench's table is the greedy step ms
  local label=$1 bin=$2 model=$3 batches=$4; shift 4
  local out ms
  out=$(timeout "${BENCH_TIMEOUT:-120}" "$bin" --model "$model" --load-format dummy --check-tokens 0 \
    --batch-sizes "$batches" "$@" 2>&1)
  local rc=$?
  ms=$(grep -E '^ +[0-9]+ ' <<< "$out" | awk '{printf "%s:%s ", $1, $4}')
  # No rows: say why (the timeout's status, or the bench's last line, which names the error).
  [[ -z "$ms" ]] && ms="no rows (rc $rc): $(tail -1 <<< "$out")"
  echo "[$label] $ms ($(elapsed) s)"
}

alternate() {  # alternate LABEL MODEL BATCHES NAME=BINARY...: one bench line per binary, "LABEL NAME", in order
  local label=$1 model=$2 batches=$3 pair; shift 3
  for pair in "$@"; do bench "$label ${pair%%=*}" "${pair#*=}" "$model" "$batches"; done
}

gtest() {  # gtest NAME: runs the packed test binary NAME on tests/data (60 s at most); one line with its verdict
  local r
  r=$(ERNIE_TEST_DATA_DIR=$PWD/tests/data timeout 60 "$d/bin/$1" 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure" | head -4)
  echo "$1: ${r:-no verdict (crashed or timed out)} ($(elapsed) s)"
}

gemv_k_splits() {  # issue 8's figure (0.70 of 4.3 TB/s at m = 1) by the GEMV's k split; summary rows only
  local ks shape
  for ks in 0 1 2 4 8; do
    for shape in square_8192 wide_4096x14336; do
      timeout 40 "$d/bin/ernie-bench-gemv" --shape $shape --ms 1 --k-slices $ks 2>&1 | grep -E '^(square|wide)' |
        awk -v ks=$ks '{print "[k-slices " ks "] " $0}'
    done
  done
}

knob_sweep() {  # knob_sweep LABEL BINARY MODEL BATCHES LIMIT KNOB...: the defaults, then each knob
  local label=$1 bin=$2 model=$3 batches=$4 limit=$5 knob; shift 5
  bench "$label default" "$bin" "$model" "$batches"
  for knob in "$@"; do
    [[ $(elapsed) -gt $limit ]] && return
    # shellcheck disable=SC2086  # the knob is a flag and its value
    bench "$label $knob" "$bin" "$model" "$batches" $knob
  done
}

tuning_ab() {  # tuning_ab LABEL BINARY MODEL BATCHES: the lm_head tuning off then on, with what it kept
  local label=$1 bin=$2 model=$3 batches=$4 t out
  for t in 0 1; do
    out=$(timeout "${BENCH_TIMEOUT:-120}" "$bin" --model "$model" --load-format dummy --check-tokens 0 \
      --batch-sizes "$batches" --lm-head-gemm-tuning $t 2>&1)
    echo "[$label tuning $t] $(grep -E '^ +[0-9]+ ' <<< "$out" | awk '{printf "%s: %s %s  ", $1, $2, $4}')($(elapsed) s)"
    grep "lm_head tuning" <<< "$out" | sed "s/^/  /" | head -1
  done
}
