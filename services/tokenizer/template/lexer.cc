#include "services/tokenizer/template/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Jinja2 (keep_trailing_newline=False) turns \r\n and \r into \n and drops
// one trailing newline before lexing.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    size_t pos = 0;
    // Whether the text about to be read starts a line (lstrip_blocks needs it).
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t tag = FindTagStart(pos);
      std::string text = src_.substr(pos, (tag == std::string::npos ? src_.size() : tag) - pos);
      if (tag == std::string::npos) {
        EmitText(std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        text = PythonStrip(text, std::nullopt, StripSide::kRight);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop spaces and tabs between the line start and the tag.
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) &&
            text.find_first_not_of(" \t", line_start) == std::string::npos) {
          text.resize(line_start);
        }
      }
      EmitText(std::move(text), pos);
      const size_t body = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::StatusOr<size_t> end = kind == '#' ? SkipComment(tag, body) : LexTag(tag, body, kind);
      if (!end.ok()) return end.status();
      pos = *end;
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = PosOf(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    size_t i = src_.find('{', from);
    while (i != std::string::npos) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
      i = src_.find('{', i + 1);
    }
    return std::string::npos;
  }

  SourcePos PosOf(size_t offset) {
    // Offsets mostly grow, so line counting resumes where it stopped.
    if (offset < line_cursor_) {
      line_cursor_ = 0;
      line_begin_ = 0;
      line_ = 1;
    }
    while (line_cursor_ < offset && line_cursor_ < src_.size()) {
      if (src_[line_cursor_] == '\n') {
        ++line_;
        line_begin_ = line_cursor_ + 1;
      }
      ++line_cursor_;
    }
    return SourcePos{line_, static_cast<int>(offset - line_begin_) + 1};
  }

  absl::Status ErrorAt(size_t offset, std::string_view message) {
    return absl::InvalidArgumentError(
        Cat("chat template syntax error at ", DescribePos(PosOf(offset)), ": ", message));
  }

  void EmitText(std::string text, size_t offset) {
    if (text.empty()) return;
    Token token;
    token.type = TokenType::kText;
    token.text = std::move(text);
    token.pos = PosOf(offset);
    tokens_.push_back(std::move(token));
  }

  void Emit(TokenType type, std::string text, size_t offset) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.pos = PosOf(offset);
    tokens_.push_back(std::move(token));
  }

  size_t SkipWhitespace(size_t pos) const {
    while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
    return pos;
  }

  absl::StatusOr<size_t> SkipComment(size_t tag, size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) return ErrorAt(tag, "unterminated comment: missing '#}'");
    size_t pos = close + 2;
    if (close > body && src_[close - 1] == '-') {
      pos = SkipWhitespace(pos);
    } else if (!(close > body && src_[close - 1] == '+') && pos < src_.size() && src_[pos] == '\n') {
      ++pos;  // trim_blocks
    }
    return pos;
  }

  // Lexes the inside of {{ ... }} or {% ... %}; returns the offset after it.
  absl::StatusOr<size_t> LexTag(size_t tag, size_t pos, char kind) {
    const bool is_block = kind == '%';
    Emit(is_block ? TokenType::kBlockBegin : TokenType::kVariableBegin, is_block ? "{%" : "{{", tag);
    if (is_block) {
      const size_t word = SkipWhitespace(pos);
      if (src_.compare(word, 3, "raw") == 0 && (word + 3 >= src_.size() || !IsNameChar(src_[word + 3]))) {
        return absl::InvalidArgumentError(Cat(
            "chat template uses an unsupported construct '{% raw %}' at ", DescribePos(PosOf(tag))));
      }
    }
    const char closer = is_block ? '%' : '}';
    int bracket_depth = 0;  // inside brackets "}}" is two braces, as in Jinja2
    while (true) {
      pos = SkipWhitespace(pos);
      if (pos >= src_.size()) {
        return ErrorAt(tag, Cat("unexpected end of template: tag opened here is missing '",
                                         is_block ? "%}" : "}}", "'"));
      }
      if (bracket_depth == 0) {
        if (src_[pos] == '-' && src_.compare(pos + 1, 2, std::string{closer, '}'}) == 0) {
          Emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos);
          return SkipWhitespace(pos + 3);
        }
        if (is_block && src_[pos] == '+' && src_.compare(pos + 1, 2, "%}") == 0) {
          Emit(TokenType::kBlockEnd, "", pos);
          return pos + 3;
        }
        if (src_.compare(pos, 2, std::string{closer, '}'}) == 0) {
          Emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos);
          pos += 2;
          if (is_block && pos < src_.size() && src_[pos] == '\n') ++pos;  // trim_blocks
          return pos;
        }
      }
      const char c = src_[pos];
      if (IsNameStart(c)) {
        size_t end = pos;
        while (end < src_.size() && IsNameChar(src_[end])) ++end;
        Emit(TokenType::kName, src_.substr(pos, end - pos), pos);
        pos = end;
      } else if (IsDigit(c)) {
        absl::StatusOr<size_t> end = LexNumber(pos);
        if (!end.ok()) return end.status();
        pos = *end;
      } else if (c == '\'' || c == '"') {
        absl::StatusOr<size_t> end = LexString(pos);
        if (!end.ok()) return end.status();
        pos = *end;
      } else {
        static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const std::string_view two : kTwoChar) {
          if (src_.compare(pos, 2, two) == 0) op = std::string(two);
        }
        if (op.empty()) {
          if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
            return ErrorAt(pos, Cat("unexpected character '", std::string(1, c), "'"));
          }
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++bracket_depth;
        if ((op == ")" || op == "]" || op == "}") && bracket_depth > 0) --bracket_depth;
        Emit(TokenType::kOperator, op, pos);
        pos += op.size();
      }
    }
  }

  size_t ScanDigits(size_t pos) const {
    // Jinja2 allows underscores between digits: 1_000.
    while (pos < src_.size() &&
           (IsDigit(src_[pos]) || (src_[pos] == '_' && pos + 1 < src_.size() && IsDigit(src_[pos + 1])))) {
      ++pos;
    }
    return pos;
  }

  absl::StatusOr<size_t> LexNumber(size_t start) {
    size_t pos = ScanDigits(start);
    bool is_float = false;
    // After a '.', a number is an attribute index (foo.0), never a float.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot) {
      if (pos + 1 < src_.size() && src_[pos] == '.' && IsDigit(src_[pos + 1])) {
        pos = ScanDigits(pos + 1);
        is_float = true;
      }
      if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
        size_t exp = pos + 1;
        if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
        if (exp < src_.size() && IsDigit(src_[exp])) {
          pos = ScanDigits(exp);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t i = start; i < pos; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token token;
    token.pos = PosOf(start);
    token.text = text;
    if (is_float) {
      token.type = TokenType::kFloat;
      token.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      token.type = TokenType::kInteger;
      errno = 0;
      token.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return ErrorAt(start, "integer literal out of range");
    }
    tokens_.push_back(std::move(token));
    return pos;
  }

  // Python's unicode-escape decoding of a string literal's body.
  absl::StatusOr<size_t> LexString(size_t start) {
    const char quote = src_[start];
    std::string value;
    size_t pos = start + 1;
    while (true) {
      if (pos >= src_.size()) return ErrorAt(start, "unterminated string literal");
      const char c = src_[pos];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++pos;
        continue;
      }
      if (pos + 1 >= src_.size()) return ErrorAt(start, "unterminated string literal");
      const char e = src_[pos + 1];
      pos += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': value.push_back('\\'); break;
        case '\'': value.push_back('\''); break;
        case '"': value.push_back('"'); break;
        case 'a': value.push_back('\a'); break;
        case 'b': value.push_back('\b'); break;
        case 'f': value.push_back('\f'); break;
        case 'n': value.push_back('\n'); break;
        case 'r': value.push_back('\r'); break;
        case 't': value.push_back('\t'); break;
        case 'v': value.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            if (pos + k >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos + k]))) {
              return ErrorAt(pos - 2, Cat("truncated \\", std::string(1, e), " escape in string"));
            }
            const char h = src_[pos + k];
            const uint32_t digit = IsDigit(h) ? h - '0' : (std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
            cp = cp * 16 + digit;
          }
          pos += digits;
          AppendUtf8(value, cp);
          break;
        }
        case 'N':
          return ErrorAt(pos - 2, "unsupported \\N{...} escape in string");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[pos++] - '0');
            }
            AppendUtf8(value, cp);
          } else {
            // Python keeps unknown escapes as written.
            value.push_back('\\');
            value.push_back(e);
          }
      }
    }
    Token token;
    token.type = TokenType::kString;
    token.text = std::move(value);
    token.pos = PosOf(start);
    tokens_.push_back(std::move(token));
    return pos + 1;
  }

  std::string src_;
  std::vector<Token> tokens_;
  size_t line_cursor_ = 0;  // offset up to which lines have been counted
  size_t line_begin_ = 0;   // offset where line_ starts
  int line_ = 1;
};

}  // namespace

std::string DescribePos(SourcePos pos) { return Cat("line ", pos.line, ", column ", pos.column); }

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace ernie::chat_template
