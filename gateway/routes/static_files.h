// The chat page and its assets from --web-dir: GET / is index.html, GET
// /web/NAME (or /NAME for a file in the folder) a file with its MIME type.
// Paths that leave the folder are refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gateway/http/http_message.h"

namespace ernie::gateway {

std::string_view ContentTypeForPath(std::string_view path);

// The response for `url_path`, or nullopt when no such file exists (the
// caller answers 404).
std::optional<HttpResponse> ServeStaticFile(const std::string& web_dir, std::string_view url_path);

}  // namespace ernie::gateway
