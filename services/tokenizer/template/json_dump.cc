#include "services/tokenizer/template/json_dump.h"

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {
namespace {

void AppendEscapedCodePoint(std::string& out, uint32_t cp) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\u%04x", cp);
  out += buffer;
}

void AppendJsonString(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  if (!ensure_ascii) {
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (u < 0x20) {
            AppendEscapedCodePoint(out, u);
          } else {
            out.push_back(c);
          }
      }
    }
  } else {
    for (const uint32_t cp : DecodeUtf8(s)) {
      if (cp == '"') {
        out += "\\\"";
      } else if (cp == '\\') {
        out += "\\\\";
      } else if (cp == '\n') {
        out += "\\n";
      } else if (cp == '\r') {
        out += "\\r";
      } else if (cp == '\t') {
        out += "\\t";
      } else if (cp == '\b') {
        out += "\\b";
      } else if (cp == '\f') {
        out += "\\f";
      } else if (cp < 0x20 || (cp >= 0x7f && cp < 0x10000)) {
        AppendEscapedCodePoint(out, cp);
      } else if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        AppendEscapedCodePoint(out, 0xD800 + (v >> 10));
        AppendEscapedCodePoint(out, 0xDC00 + (v & 0x3FF));
      } else {
        out.push_back(static_cast<char>(cp));
      }
    }
  }
  out.push_back('"');
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {}

  absl::Status Write(const Value& value, int depth) {
    switch (value.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return absl::OkStatus();
      case Value::Kind::kBool:
        out_ += value.as_bool() ? "true" : "false";
        return absl::OkStatus();
      case Value::Kind::kInt:
        out_ += Cat(value.as_int());
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        const std::string repr = FormatPythonFloat(value.as_float());
        if (repr == "inf") {
          out_ += "Infinity";
        } else if (repr == "-inf") {
          out_ += "-Infinity";
        } else if (repr == "nan") {
          out_ += "NaN";
        } else {
          out_ += repr;
        }
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        AppendJsonString(out_, value.as_string(), options_.ensure_ascii);
        return absl::OkStatus();
      case Value::Kind::kList:
        return WriteList(value.as_list(), depth);
      case Value::Kind::kDict:
        if (value.as_dict().is_namespace) break;
        return WriteDict(value.as_dict(), depth);
      default:
        break;
    }
    std::string type = value.is_undefined() ? "Undefined"
                       : value.is_dict()    ? "Namespace"
                                            : "function";
    return absl::InvalidArgumentError(Cat("Object of type ", type, " is not JSON serializable"));
  }

  std::string Take() { return std::move(out_); }

 private:
  void NewLine(int depth) {
    if (!options_.has_indent) return;
    out_.push_back('\n');
    for (int i = 0; i < depth; ++i) out_ += options_.indent;
  }

  absl::Status WriteList(const List& list, int depth) {
    if (list.items.empty()) {
      out_ += "[]";
      return absl::OkStatus();
    }
    out_.push_back('[');
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      NewLine(depth + 1);
      ERNIE_RETURN_IF_ERROR(Write(list.items[i], depth + 1));
    }
    NewLine(depth);
    out_.push_back(']');
    return absl::OkStatus();
  }

  absl::Status WriteDict(const Dict& dict, int depth) {
    if (dict.items.empty()) {
      out_ += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    entries.reserve(dict.items.size());
    for (const auto& entry : dict.items) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out_.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      NewLine(depth + 1);
      AppendJsonString(out_, entries[i]->first, options_.ensure_ascii);
      out_ += options_.key_separator;
      ERNIE_RETURN_IF_ERROR(Write(entries[i]->second, depth + 1));
    }
    NewLine(depth);
    out_.push_back('}');
    return absl::OkStatus();
  }

  const JsonDumpOptions& options_;
  std::string out_;  // the text written so far
};

}  // namespace

absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  ERNIE_RETURN_IF_ERROR(writer.Write(value, 0));
  return writer.Take();
}

}  // namespace ernie::chat_template
