// One generation request end to end, after its prompts are token ids: picks
// a worker per prompt, streams its tokens (Worker.Generate, or a request on
// the worker's shared GenerateMany streams), turns tokens into text
// (detokenizer + stop strings) and answers through the ResponseChannel,
// either as one JSON response or as OpenAI's SSE chunks.
//
// Lifetime: shared by its gRPC calls and the channel's close callback; it
// ends when every call is done. All state is guarded by one mutex, held
// while writing to the channel so chunks keep their order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/http/response_channel.h"
#include "gateway/openai/generation_params.h"
#include "gateway/openai/response_json.h"
#include "gateway/routes/gateway_metrics.h"
#include "gateway/upstream/upstream_timeouts.h"
#include "gateway/upstream/worker_pool.h"
#include "services/tokenizer/detokenizer/detokenizer_table.h"

namespace ernie::gateway {

struct GenerationPrompt {
  std::vector<int32_t> token_ids;
  int32_t max_tokens = 1;  // resolved against the model length
  std::string echo_text;   // completions with echo: shown before the output
};

struct GenerationJobSpec {
  ResponseHeader header;
  std::string request_id;  // X-Request-Id, sent to the worker as metadata
  GenerationParams params;
  GenerationDefaults defaults;
  std::vector<GenerationPrompt> prompts;  // choices are numbered prompt * n + sample
  // When the HTTP request arrived (before tokenization): latency metrics start here.
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

struct GenerationServices {
  WorkerPool* workers = nullptr;
  std::shared_ptr<const tokenizer::DetokenizerTable> table;
  GatewayMetrics* metrics = nullptr;  // not owned; null: nothing is recorded
  UpstreamTimeouts timeouts;          // limits on waiting for the worker
};

// Starts the job; it answers on `channel` by itself.
void StartGenerationJob(GenerationJobSpec spec, const GenerationServices& services,
                        std::shared_ptr<ResponseChannel> channel);

}  // namespace ernie::gateway
