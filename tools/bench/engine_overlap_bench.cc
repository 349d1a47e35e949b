// ernie-bench-engine: the engine's own host cost a step, and what
// overlapped steps (EngineConfig::overlap_steps) hide of it, on this machine.
//
// The instant backend stands in for the device: each step lasts
// --step-us + --token-ns a token + --row-ns a logit row on its "device"
// (launches queue like a GPU stream's), and tokens cost no host time to
// make. S requests (prompt P, output O, greedy) run through EngineCore one
// step at a time, then overlapped, alternating for --rounds rounds. One step
// at a time, a step's wall time is the device's plus the engine's host work
// (scheduling, batch building, sampling bookkeeping, delivery to the sinks);
// overlapped, the host work runs during the device's step, so the wall time
// falls to the device's as long as the host keeps up.
//
//   ernie-bench-engine [--streams 1,64,256] [--prompt-len 128] [--output-len 128]
//                      [--step-us 455] [--token-ns 0] [--row-ns 0] [--rounds 2] [--loop 0|1] [--log FILE]
// --loop 1 runs the engine on an EngineLoop thread fed by SubmitAsync, as in the worker.
// --ttft 1 instead measures time to first token under steady arrivals (each
// stream sends its next request when its last finishes, --per-stream 6 in
// all; engine_streams.h RunSteadyArrivals): in engine steps and ms, p50 and
// p90, one step at a time against overlapped. Async scheduling's structural
// cost is one step: a request that arrives while step N runs goes into N+2.
// The defaults pace every step at 455 us, the 0.3b's batch-1 step on the
// H200 (NOTES.md v27), so a figure reads as "at that step time".
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/backend/instant/instant_backend.h"
#include "nlohmann/json.hpp"
#include "tools/bench/cuda/int_list_flag.h"  // header only: no CUDA
#include "tools/bench/engine_streams.h"

namespace {

struct Args {
  std::vector<int> streams = {1, 64, 256};
  int prompt_len = 128, output_len = 128, rounds = 2;
  int64_t step_us = 455, token_ns = 0, row_ns = 0;
  bool loop = false;  // --loop 1: through an EngineLoop thread, as in the worker
  bool ttft = false;  // --ttft 1: steady arrivals' time to first token
  int per_stream = 6;
  std::string log;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (f == "--streams") {
      if (!ernie::bench::ParsePositiveIntList(v, &a->streams)) return false;
    } else if (f == "--prompt-len") {
      if (!absl::SimpleAtoi(v, &a->prompt_len) || a->prompt_len <= 0) return false;
    } else if (f == "--output-len") {
      if (!absl::SimpleAtoi(v, &a->output_len) || a->output_len <= 0) return false;
    } else if (f == "--rounds") {
      if (!absl::SimpleAtoi(v, &a->rounds) || a->rounds <= 0) return false;
    } else if (f == "--step-us") {
      if (!absl::SimpleAtoi(v, &a->step_us) || a->step_us < 0) return false;
    } else if (f == "--token-ns") {
      if (!absl::SimpleAtoi(v, &a->token_ns) || a->token_ns < 0) return false;
    } else if (f == "--row-ns") {
      if (!absl::SimpleAtoi(v, &a->row_ns) || a->row_ns < 0) return false;
    } else if (f == "--loop") {
      int x = 0;
      if (!absl::SimpleAtoi(v, &x) || x < 0 || x > 1) return false;
      a->loop = x == 1;
    } else if (f == "--ttft") {
      int x = 0;
      if (!absl::SimpleAtoi(v, &x) || x < 0 || x > 1) return false;
      a->ttft = x == 1;
    } else if (f == "--per-stream") {
      if (!absl::SimpleAtoi(v, &a->per_stream) || a->per_stream < 2) return false;
    } else if (f == "--log") {
      a->log = v;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: ernie-bench-engine [--streams 1,64,256] [--prompt-len 128] [--output-len 128] "
                 "[--step-us 455] [--token-ns 0] [--row-ns 0] [--rounds 2] [--loop 0|1] [--ttft 0|1] [--per-stream 6] [--log FILE]\n";
    return 2;
  }
  int max_streams = 1;
  for (int s : args.streams) max_streams = std::max(max_streams, s);
  constexpr int64_t kBlock = 16;
  auto backend = ernie::InstantBackend::Create(
      {.vocab_size = 103424,  // ERNIE-4.5's: the engine's per-token work sees the real id range
       .block_size = kBlock,
       .num_blocks = max_streams * ((args.prompt_len + args.output_len + kBlock - 1) / kBlock + 1),
       .max_tokens_per_step = 2048,
       .step_floor = std::chrono::microseconds(args.step_us),
       .token_cost = std::chrono::nanoseconds(args.token_ns),
       .logit_row_cost = std::chrono::nanoseconds(args.row_ns)});
  if (!backend.ok()) {
    std::cerr << "ernie-bench-engine: " << backend.status() << "\n";
    return 1;
  }
  nlohmann::json log = {{"bench", "engine_overlap"},
                        {"through_loop", args.loop},
                        {"step_us", args.step_us},
                        {"token_ns", args.token_ns},
                        {"row_ns", args.row_ns},
                        {"prompt_len", args.prompt_len},
                        {"output_len", args.output_len}};
  if (args.ttft) {
    log["ttft"] = true;
    log["per_stream"] = args.per_stream;
    std::printf("streams  mode           round  requests  steps  TTFT steps p50 / p90  TTFT ms p50 / p90\n");
    for (int streams : args.streams) {
      nlohmann::json entry = {{"streams", streams}};
      for (int round = 1; round <= args.rounds; ++round)
        for (const bool overlap : {false, true}) {
          auto r = ernie::bench::RunSteadyArrivals(**backend, streams, args.per_stream, args.prompt_len,
                                                   args.output_len, overlap);
          if (!r.ok()) {
            std::cerr << "ernie-bench-engine: " << streams << " streams: " << r.status() << "\n";
            return 1;
          }
          const char* mode = overlap ? "overlapped" : "one_at_a_time";
          entry[mode].push_back({{"requests", r->requests},
                                 {"steps", r->steps},
                                 {"ttft_steps_p50", r->ttft_steps_p50},
                                 {"ttft_steps_p90", r->ttft_steps_p90},
                                 {"ttft_ms_p50", r->ttft_ms_p50},
                                 {"ttft_ms_p90", r->ttft_ms_p90},
                                 {"overlapped", r->overlapped}});
          std::printf("%7d  %-13s  %5d  %8lld  %5lld  %9.0f / %-9.0f  %7.2f / %.2f\n", streams, mode, round,
                      static_cast<long long>(r->requests), static_cast<long long>(r->steps), r->ttft_steps_p50,
                      r->ttft_steps_p90, r->ttft_ms_p50, r->ttft_ms_p90);
        }
      log["streams"].push_back(entry);
    }
    if (!args.log.empty()) std::ofstream(args.log, std::ios::app) << log.dump() << "\n";
    return 0;
  }
  std::printf("streams  mode           round   tok/s  decode tok/s  steps  wall/step us\n");
  for (int streams : args.streams) {
    nlohmann::json entry = {{"streams", streams}};
    struct Mode {
      const char* name;
      bool overlap;
    };
    const Mode modes[] = {{"one_at_a_time", false}, {"overlapped", true}};
    for (int round = 0; round <= args.rounds; ++round)  // round 0: untimed warm-up
      for (const Mode& mode : modes) {
        auto r = ernie::bench::RunEngineStreams(**backend, streams, args.prompt_len, args.output_len, mode.overlap,
                                                args.loop);
        if (!r.ok()) {
          std::cerr << "ernie-bench-engine: " << streams << " streams: " << r.status() << "\n";
          return 1;
        }
        if (round == 0) continue;
        const double wall_per_step_us = r->total_s * 1e6 / static_cast<double>(r->steps);
        entry[mode.name].push_back({{"tok_s", r->tok_s()},
                                    {"decode_tok_s", r->decode_tok_s(streams)},
                                    {"steps", r->steps},
                                    {"wall_per_step_us", wall_per_step_us},
                                    {"overlapped", r->overlapped}});
        std::printf("%7d  %-13s  %5d  %6.0f  %12.0f  %5lld  %12.1f\n", streams, mode.name, round, r->tok_s(),
                    r->decode_tok_s(streams), static_cast<long long>(r->steps), wall_per_step_us);
      }
    log["streams"].push_back(entry);
  }
  if (!args.log.empty()) std::ofstream(args.log, std::ios::app) << log.dump() << "\n";
  return 0;
}
