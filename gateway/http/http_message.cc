#include "gateway/http/http_message.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ernie::gateway {
namespace {

void AppendHead(const HttpResponse& response, bool keep_alive, std::string* out) {
  absl::StrAppend(out, "HTTP/1.1 ", response.status, " ", std::string(ReasonPhrase(response.status)), "\r\n");
  absl::StrAppend(out, "Server: ernie-gateway\r\n");
  if (!response.content_type.empty()) absl::StrAppend(out, "Content-Type: ", response.content_type, "\r\n");
  for (const auto& [name, value] : response.headers) absl::StrAppend(out, name, ": ", value, "\r\n");
  absl::StrAppend(out, keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::string SerializeResponse(const HttpResponse& response, bool keep_alive) {
  std::string out;
  out.reserve(256 + response.body.size());
  AppendHead(response, keep_alive, &out);
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n\r\n");
  out += response.body;
  return out;
}

std::string SerializeStreamHead(const HttpResponse& head, bool keep_alive) {
  std::string out;
  AppendHead(head, keep_alive, &out);
  absl::StrAppend(&out, "Transfer-Encoding: chunked\r\n\r\n");
  return out;
}

std::string SerializeChunk(std::string_view data) {
  // An empty chunk would end the body, so it is never written.
  if (data.empty()) return {};
  std::string out = absl::StrFormat("%x\r\n", data.size());
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace ernie::gateway
