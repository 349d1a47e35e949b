// One accepted connection: reads requests one after another, hands each to
// the handler with a ResponseChannel, writes the answer through a bounded
// queue. Internal to the HTTP server.
#pragma once

#include <memory>

#include "boost/asio/ip/tcp.hpp"
#include "gateway/http/http_server.h"

namespace ernie::gateway {

// Starts serving `socket` (whose executor is a strand of its own).
void StartHttpSession(boost::asio::ip::tcp::socket socket, const HttpServerOptions& options,
                      std::shared_ptr<const RequestHandler> handler);

}  // namespace ernie::gateway
