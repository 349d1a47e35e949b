#include "gateway/routes/static_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>


namespace ernie::gateway {

std::string_view ContentTypeForPath(std::string_view path) {
  struct Type {
    std::string_view suffix, type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},  {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},          {".svg", "image/svg+xml"},
      {".png", "image/png"},                  {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},  {".map", "application/json"},
      {".woff2", "font/woff2"},               {".jpg", "image/jpeg"},
  };
  for (const Type& type : kTypes) {
    if (path.ends_with(type.suffix)) return type.type;
  }
  return "application/octet-stream";
}

std::optional<HttpResponse> ServeStaticFile(const std::string& web_dir, std::string_view url_path) {
  std::string_view relative = url_path;
  if (relative.starts_with("/web/")) relative.remove_prefix(5);
  while (relative.starts_with("/")) relative.remove_prefix(1);
  if (relative.empty()) relative = "index.html";
  // No "..", no hidden files, no absolute paths: the folder is the whole tree.
  auto contains = [relative](std::string_view part) { return relative.find(part) != std::string_view::npos; };
  if (contains("..") || contains("\\") || relative.starts_with(".") || contains("/.")) {
    return std::nullopt;
  }
  const std::filesystem::path path = std::filesystem::path(web_dir) / std::string(relative);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::stringstream bytes;
  bytes << file.rdbuf();
  return HttpResponse{.status = 200,
                      .content_type = std::string(ContentTypeForPath(path.string())),
                      .headers = {{"Cache-Control", "no-cache"}},
                      .body = bytes.str()};
}

}  // namespace ernie::gateway
