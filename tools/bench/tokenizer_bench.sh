#!/bin/sh
# Tokenizer benchmark with python3-sentencepiece beside it on the same text.
#   tools/bench/tokenizer_bench.sh BUILD_DIR MODEL_DIR [LOG]
set -eu
build=$1 model=$2 log=${3:-tokenizer_bench.log}
text=$(mktemp)
"$build/bin/ernie_bench_tokenizer" "$model" "$text" > "$log.tmp"
/usr/bin/python3 - "$model/tokenizer.model" "$text" >> "$log.tmp" <<'PY'
import sys, time, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().split("\x1e")[:-1]
size = sum(len(l.encode()) for l in lines)
start = time.perf_counter()
for line in lines:
    sp.encode(line)
print("encode_python_sentencepiece %.2f MB/s" % (size / 1e6 / (time.perf_counter() - start)))
PY
rm -f "$text"
mv "$log.tmp" "$log"
printf '%-30s %14s %s\n' benchmark value unit
awk '{ printf "%-30s %14s %s\n", $1, $2, substr($0, index($0, $3)) }' "$log"
