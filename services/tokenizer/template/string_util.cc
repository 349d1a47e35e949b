#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int length = 1;
    uint32_t cp = b0;
    if (b0 >= 0xF0 && b0 < 0xF8) {
      length = 4;
      cp = b0 & 0x07;
    } else if (b0 >= 0xE0) {
      length = b0 < 0xF0 ? 3 : 1;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xC0) {
      length = 2;
      cp = b0 & 0x1F;
    } else if (b0 >= 0x80) {
      length = 0;  // a stray continuation byte
    }
    if (length == 0 || (b0 >= 0xF8) || i + length > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    bool valid = true;
    for (int k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (!valid) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += length;
  }
  return out;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (const uint32_t cp : cps) AppendUtf8(out, cp);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t count = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}

bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string PythonStrip(std::string_view s, const std::optional<std::string>& chars, StripSide side) {
  const std::vector<uint32_t> cps = DecodeUtf8(s);
  std::vector<uint32_t> strip_set;
  if (chars.has_value()) strip_set = DecodeUtf8(*chars);
  auto strippable = [&](uint32_t cp) {
    if (!chars.has_value()) return IsPythonSpace(cp);
    for (const uint32_t c : strip_set) {
      if (c == cp) return true;
    }
    return false;
  };
  size_t begin = 0;
  size_t end = cps.size();
  if (side != StripSide::kRight) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return EncodeUtf8(std::vector<uint32_t>(cps.begin() + begin, cps.begin() + end));
}

std::vector<std::string> PythonSplit(std::string_view s, const std::optional<std::string>& sep,
                                     int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep.has_value()) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t found = s.find(*sep, start);
      if (found == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, found - start));
      start = found + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::vector<uint32_t> cps = DecodeUtf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      size_t end = cps.size();
      while (end > i && IsPythonSpace(cps[end - 1])) --end;
      parts.push_back(EncodeUtf8(std::vector<uint32_t>(cps.begin() + i, cps.begin() + end)));
      break;
    }
    const size_t start = i;
    while (i < cps.size() && !IsPythonSpace(cps[i])) ++i;
    parts.push_back(EncodeUtf8(std::vector<uint32_t>(cps.begin() + start, cps.begin() + i)));
  }
  return parts;
}

std::vector<std::string> PythonSplitLines(std::string_view s) {
  const std::vector<uint32_t> cps = DecodeUtf8(s);
  std::vector<std::string> lines;
  std::vector<uint32_t> current;
  size_t i = 0;
  while (i < cps.size()) {
    const uint32_t cp = cps[i];
    const bool is_break = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                          cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (is_break) {
      lines.push_back(EncodeUtf8(current));
      current.clear();
      if (cp == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    } else {
      current.push_back(cp);
    }
    ++i;
  }
  if (!current.empty()) lines.push_back(EncodeUtf8(current));
  return lines;
}

std::string PythonUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string PythonLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string PythonTitle(std::string_view s) {
  std::string out(s);
  bool previous_is_letter = false;
  for (char& c : out) {
    const bool is_upper = c >= 'A' && c <= 'Z';
    const bool is_lower = c >= 'a' && c <= 'z';
    if (is_upper || is_lower) {
      if (previous_is_letter && is_upper) c = static_cast<char>(c - 'A' + 'a');
      if (!previous_is_letter && is_lower) c = static_cast<char>(c - 'a' + 'A');
      previous_is_letter = true;
    } else {
      // Non-ASCII bytes count as cased letters only if they are; treat
      // them as letters so "éa" does not capitalise the 'a'.
      previous_is_letter = static_cast<unsigned char>(c) >= 0x80 && previous_is_letter;
    }
  }
  return out;
}

std::string PythonCapitalize(std::string_view s) {
  std::string out = PythonLower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string PythonReplace(std::string_view s, std::string_view old_text, std::string_view new_text,
                          int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` between every code point (and at both ends).
    const std::vector<uint32_t> cps = DecodeUtf8(s);
    int64_t done = 0;
    for (const uint32_t cp : cps) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      AppendUtf8(out, cp);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old_text, start);
    if (found == std::string_view::npos) break;
    out.append(s.substr(start, found - start));
    out.append(new_text);
    start = found + old_text.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

}  // namespace ernie::chat_template
