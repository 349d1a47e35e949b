#include "services/tokenizer/template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) { return Value(Storage(UndefinedHint{std::move(hint)})); }
Value Value::None() { return Value(Storage(NoneTag{})); }
Value Value::Bool(bool b) { return Value(Storage(b)); }
Value Value::Int(int64_t i) { return Value(Storage(i)); }
Value Value::Float(double d) { return Value(Storage(d)); }
Value Value::String(std::string s) { return Value(Storage(std::move(s))); }
Value Value::MakeList(std::vector<Value> items, bool is_tuple) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->is_tuple = is_tuple;
  return Value(Storage(std::move(list)));
}
Value Value::MakeDict(std::shared_ptr<Dict> dict) { return Value(Storage(std::move(dict))); }
Value Value::MakeCallable(std::shared_ptr<const Callable> callable) {
  return Value(Storage(std::move(callable)));
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Float(static_cast<double>(u));
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& element : json) items.push_back(FromJson(element));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto dict = std::make_shared<Dict>();
      dict->items.reserve(json.size());
      for (const auto& [key, element] : json.items()) {
        dict->items.emplace_back(key, FromJson(element));
      }
      return MakeDict(std::move(dict));
    }
    default:  // binary and discarded values never come out of a JSON parser
      return None();
  }
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().items.empty();
    case Kind::kDict:
      return as_dict().is_namespace || !as_dict().items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string FormatPythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[64];
  // Shortest round-trip digits, then laid out the way Python's repr does.
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const int decimal_point = exponent + 1;  // digits before the point
  if (decimal_point > 16 || decimal_point <= -4) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mantissa + exp_text;
  }
  if (decimal_point <= 0) return sign + "0." + std::string(-decimal_point, '0') + digits;
  if (static_cast<size_t>(decimal_point) >= digits.size()) {
    return sign + digits + std::string(decimal_point - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, decimal_point) + "." + digits.substr(decimal_point);
}

std::string PythonStringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::ToPrintString() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    default:
      return ToRepr();
  }
}

std::string Value::ToRepr() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return Cat(as_int());
    case Kind::kFloat:
      return FormatPythonFloat(as_float());
    case Kind::kString:
      return PythonStringRepr(as_string());
    case Kind::kList: {
      const List& list = as_list();
      std::string out = list.is_tuple ? "(" : "[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += list.items[i].ToRepr();
      }
      if (list.is_tuple && list.items.size() == 1) out += ",";
      out += list.is_tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      const Dict& dict = as_dict();
      std::string out = "{";
      for (size_t i = 0; i < dict.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += PythonStringRepr(dict.items[i].first) + ": " + dict.items[i].second.ToRepr();
      }
      out += "}";
      return dict.is_namespace ? "<Namespace " + out + ">" : out;
    }
    case Kind::kCallable:
      return "<function " + as_callable().name + ">";
  }
  return "";
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_float() == other.as_float();
    return as_int() == other.as_int();
  }
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return as_string() == other.as_string();
    case Kind::kList: {
      const List& a = as_list();
      const List& b = other.as_list();
      if (a.is_tuple != b.is_tuple || a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (!a.items[i].Equals(b.items[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& a = as_dict();
      const Dict& b = other.as_dict();
      if (a.is_namespace || b.is_namespace) return &a == &b;
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [key, value] : a.items) {
        const Value* found = b.Find(key);
        if (found == nullptr || !value.Equals(*found)) return false;
      }
      return true;
    }
    case Kind::kCallable:
      return &as_callable() == &other.as_callable();
    default:
      return false;
  }
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "'bool object'";
    case Kind::kInt:
      return "'int object'";
    case Kind::kFloat:
      return "'float object'";
    case Kind::kString:
      return "'str object'";
    case Kind::kList:
      return as_list().is_tuple ? "'tuple object'" : "'list object'";
    case Kind::kDict:
      return as_dict().is_namespace ? "'Namespace object'" : "'dict object'";
    case Kind::kCallable:
      return "'function object'";
  }
  return "'object'";
}

std::string Value::PythonTypeName() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return as_list().is_tuple ? "tuple" : "list";
    case Kind::kDict: return as_dict().is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "object";
}

}  // namespace ernie::chat_template
