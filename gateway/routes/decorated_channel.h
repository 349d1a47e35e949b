// Wraps a route's ResponseChannel: adds the headers every response carries
// (X-Request-Id, CORS) and records the route's metrics when the answer
// starts and ends.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "gateway/http/response_channel.h"
#include "gateway/routes/gateway_metrics.h"

namespace ernie::gateway {

class DecoratedChannel : public ResponseChannel {
 public:
  DecoratedChannel(std::shared_ptr<ResponseChannel> inner, GatewayMetrics* metrics, std::string route,
                   std::string request_id, bool cors);
  ~DecoratedChannel() override;

  void Respond(HttpResponse response) override;
  void StartStream(HttpResponse head) override;
  void Send(std::string data) override { inner_->Send(std::move(data)); }
  void End() override;
  void SetOnClosed(std::function<void()> on_closed) override;
  size_t buffered_bytes() const override { return inner_->buffered_bytes(); }
  bool congested() const override { return inner_->congested(); }
  void WhenWritable(std::function<void()> resume) override { inner_->WhenWritable(std::move(resume)); }
  bool closed() const override { return inner_->closed(); }

 private:
  void AddHeaders(HttpResponse& response) const;
  void EndStreamOnce();

  std::shared_ptr<ResponseChannel> inner_;
  GatewayMetrics* metrics_;
  std::string route_;
  std::string request_id_;
  bool cors_;
  std::atomic<bool> answered_{false};    // counted once
  std::atomic<bool> streaming_{false};   // a stream is open (counted in streams_in_flight)
};

}  // namespace ernie::gateway
