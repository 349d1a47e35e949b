#include "gateway/routes/gateway_metrics.h"

#include "absl/strings/str_cat.h"

namespace ernie::gateway {

void GatewayMetrics::CountRequest(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route, status}];
}

int64_t GatewayMetrics::requests(const std::string& route, int status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find({route, status});
  return it == requests_.end() ? 0 : it->second;
}

std::string GatewayMetrics::Exposition() const {
  std::string out;
  absl::StrAppend(&out, "# HELP ernie_gateway_requests_total HTTP requests answered, by route and status.\n",
                  "# TYPE ernie_gateway_requests_total counter\n");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, count] : requests_) {
      absl::StrAppend(&out, "ernie_gateway_requests_total{route=\"", key.first, "\",status=\"", key.second, "\"} ",
                      count, "\n");
    }
  }
  absl::StrAppend(&out, "# HELP ernie_gateway_requests_in_flight Requests being answered now.\n",
                  "# TYPE ernie_gateway_requests_in_flight gauge\n",
                  "ernie_gateway_requests_in_flight ", requests_in_flight(), "\n",
                  "# HELP ernie_gateway_streams_in_flight SSE streams open now.\n",
                  "# TYPE ernie_gateway_streams_in_flight gauge\n",
                  "ernie_gateway_streams_in_flight ", streams_in_flight(), "\n");
  return out;
}

}  // namespace ernie::gateway
