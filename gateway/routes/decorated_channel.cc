#include "gateway/routes/decorated_channel.h"

namespace ernie::gateway {

DecoratedChannel::DecoratedChannel(std::shared_ptr<ResponseChannel> inner, GatewayMetrics* metrics, std::string route,
                                   std::string request_id, bool cors)
    : inner_(std::move(inner)), metrics_(metrics), route_(std::move(route)), request_id_(std::move(request_id)),
      cors_(cors) {
  metrics_->RequestStarted();
}

DecoratedChannel::~DecoratedChannel() {
  EndStreamOnce();
  // A request dropped without an answer (client gone first) is counted as 499.
  if (!answered_.exchange(true)) metrics_->CountRequest(route_, 499);
  metrics_->RequestEnded();
}

void DecoratedChannel::AddHeaders(HttpResponse& response) const {
  response.headers.emplace_back("X-Request-Id", request_id_);
  if (cors_) {
    response.headers.emplace_back("Access-Control-Allow-Origin", "*");
    response.headers.emplace_back("Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
  }
}

void DecoratedChannel::Respond(HttpResponse response) {
  if (answered_.exchange(true)) return;
  metrics_->CountRequest(route_, response.status);
  AddHeaders(response);
  inner_->Respond(std::move(response));
}

void DecoratedChannel::StartStream(HttpResponse head) {
  if (answered_.exchange(true)) return;
  metrics_->CountRequest(route_, head.status);
  metrics_->StreamStarted();
  streaming_ = true;
  AddHeaders(head);
  inner_->StartStream(std::move(head));
}

void DecoratedChannel::End() {
  EndStreamOnce();
  inner_->End();
}

void DecoratedChannel::EndStreamOnce() {
  if (streaming_.exchange(false)) metrics_->StreamEnded();
}

void DecoratedChannel::SetOnClosed(std::function<void()> on_closed) {
  inner_->SetOnClosed(std::move(on_closed));
}

}  // namespace ernie::gateway
