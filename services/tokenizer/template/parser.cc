#include "services/tokenizer/template/parser.h"

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"
#include "services/tokenizer/template/builtins.h"
#include "services/tokenizer/template/lexer.h"

namespace ernie::chat_template {
namespace {

// Tags of Jinja2 that exist but that chat templates do not need.
constexpr std::string_view kUnsupportedTags[] = {
    "include", "extends", "block", "import", "from", "with", "filter",
    "autoescape", "do", "trans", "generation", "print", "pluralize"};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseAll() {
    std::string end;
    ERNIE_ASSIGN_OR_RETURN(Body body, ParseBody({}, nullptr, &end));
    return body;
  }

 private:
  const Token& Current() const { return tokens_[index_]; }
  const Token& Peek(size_t ahead) const {
    return tokens_[std::min(index_ + ahead, tokens_.size() - 1)];
  }
  void Advance() {
    if (index_ + 1 < tokens_.size()) ++index_;
  }
  bool IsOp(std::string_view op) const {
    return Current().type == TokenType::kOperator && Current().text == op;
  }
  bool IsName(std::string_view name) const {
    return Current().type == TokenType::kName && Current().text == name;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }

  static std::string Describe(const Token& token) {
    switch (token.type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVariableEnd: return "'}}'";
      case TokenType::kString: return "a string";
      case TokenType::kInteger:
      case TokenType::kFloat: return "a number";
      default: return Cat("'", token.text, "'");
    }
  }

  absl::Status ErrorAt(SourcePos pos, std::string_view message) const {
    return absl::InvalidArgumentError(
        Cat("chat template syntax error at ", DescribePos(pos), ": ", message));
  }
  absl::Status Unexpected(std::string_view expected) const {
    return ErrorAt(Current().pos, Cat("expected ", expected, ", got ", Describe(Current())));
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Unexpected(Cat("'", op, "'"));
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Current().type != TokenType::kBlockEnd) return Unexpected("'%}'");
    Advance();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Current().type != TokenType::kName) return Unexpected("a name");
    std::string name = Current().text;
    Advance();
    return name;
  }

  // Parses statements until a block tag whose name is in `ends` (consumed,
  // name stored in *found_end) or, when `ends` is empty, the end of input.
  absl::StatusOr<Body> ParseBody(std::initializer_list<std::string_view> ends, const Token* opener,
                                 std::string* found_end) {
    Nesting nesting(this);
    if (!nesting.Deeper()) return TooDeep();
    Body body;
    while (true) {
      const Token& token = Current();
      if (token.type == TokenType::kEof) {
        if (ends.size() == 0) return body;
        std::string_view closing = *ends.begin();
        for (const std::string_view end : ends) {
          if (end.substr(0, 3) == "end") closing = end;
        }
        return ErrorAt(opener->pos, Cat("unterminated '{% ", opener->text, " %}' block: expected '{% ", closing,
                                        " %}' before the end of the template"));
      }
      if (token.type == TokenType::kText) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kText;
        stmt->pos = token.pos;
        stmt->text = token.text;
        body.push_back(std::move(stmt));
        Advance();
      } else if (token.type == TokenType::kVariableBegin) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kOutput;
        stmt->pos = token.pos;
        Advance();
        ERNIE_ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true));
        if (Current().type != TokenType::kVariableEnd) return Unexpected("'}}'");
        Advance();
        body.push_back(std::move(stmt));
      } else if (token.type == TokenType::kBlockBegin) {
        const Token& tag = Peek(1);
        if (tag.type != TokenType::kName) {
          return ErrorAt(tag.pos, Cat("expected a tag name, got ", Describe(tag)));
        }
        for (const std::string_view end : ends) {
          if (tag.text == end) {
            *found_end = tag.text;
            Advance();
            Advance();
            return body;
          }
        }
        Token tag_at_block = tag;
        tag_at_block.pos = token.pos;  // report tags where their "{%" starts
        Advance();
        ERNIE_ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement(tag_at_block));
        body.push_back(std::move(stmt));
      } else {
        return Unexpected("text or a tag");
      }
    }
  }

  // `tag` is the tag's name token, positioned at its "{%".
  absl::StatusOr<StmtPtr> ParseStatement(const Token& tag) {
    for (const std::string_view unsupported : kUnsupportedTags) {
      if (tag.text == unsupported) {
        return absl::InvalidArgumentError(Cat("chat template uses an unsupported construct '{% ",
                                                       tag.text, " %}' at ", DescribePos(tag.pos)));
      }
    }
    Advance();
    auto stmt = std::make_unique<Stmt>();
    stmt->pos = tag.pos;
    if (tag.text == "if") return ParseIf(std::move(stmt), tag);
    if (tag.text == "for") return ParseFor(std::move(stmt), tag);
    if (tag.text == "set") return ParseSet(std::move(stmt), tag);
    if (tag.text == "macro") return ParseMacro(std::move(stmt), tag);
    if (tag.text == "call") return ParseCallBlock(std::move(stmt), tag);
    if (tag.text == "break" || tag.text == "continue") {
      if (loop_depth_ == 0) return ErrorAt(tag.pos, Cat("'", tag.text, "' outside a for loop"));
      stmt->kind = tag.text == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    static constexpr std::string_view kEndTags[] = {"endif", "elif", "else", "endfor", "endset",
                                                    "endmacro", "endcall"};
    for (const std::string_view end : kEndTags) {
      if (tag.text == end) {
        return ErrorAt(tag.pos, Cat("unexpected '{% ", tag.text, " %}' with no open block it closes"));
      }
    }
    return ErrorAt(tag.pos, Cat("unknown tag '{% ", tag.text, " %}'"));
  }

  absl::StatusOr<StmtPtr> ParseIf(StmtPtr stmt, const Token& tag) {
    stmt->kind = Stmt::Kind::kIf;
    ExprPtr condition;
    ERNIE_ASSIGN_OR_RETURN(condition, ParseTuple(true));
    while (true) {
      ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      IfBranch branch;
      branch.condition = std::move(condition);
      const bool is_else = branch.condition == nullptr;
      if (is_else) {
        ERNIE_ASSIGN_OR_RETURN(branch.body, ParseBody({"endif"}, &tag, &end));
      } else {
        ERNIE_ASSIGN_OR_RETURN(branch.body, ParseBody({"elif", "else", "endif"}, &tag, &end));
      }
      stmt->branches.push_back(std::move(branch));
      if (end == "endif") break;
      if (end == "elif") {
        ERNIE_ASSIGN_OR_RETURN(condition, ParseTuple(true));
      } else {
        condition = nullptr;
      }
    }
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<AssignTarget> ParseAssignTarget(bool allow_attribute) {
    AssignTarget target;
    const bool parenthesised = SkipOp("(");
    ERNIE_ASSIGN_OR_RETURN(std::string first, ExpectName());
    target.names.push_back(first);
    if (allow_attribute && !parenthesised && IsOp(".")) {
      Advance();
      ERNIE_ASSIGN_OR_RETURN(target.attribute, ExpectName());
      return target;
    }
    while (SkipOp(",")) {
      target.is_tuple = true;
      if (Current().type != TokenType::kName) break;  // trailing comma
      ERNIE_ASSIGN_OR_RETURN(std::string name, ExpectName());
      target.names.push_back(name);
    }
    if (parenthesised) ERNIE_RETURN_IF_ERROR(ExpectOp(")"));
    for (const std::string& name : target.names) {
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None") {
        return ErrorAt(Current().pos, Cat("cannot assign to '", name, "'"));
      }
    }
    return target;
  }

  absl::StatusOr<StmtPtr> ParseFor(StmtPtr stmt, const Token& tag) {
    stmt->kind = Stmt::Kind::kFor;
    ERNIE_ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(false));
    if (!SkipName("in")) return Unexpected("'in'");
    ERNIE_ASSIGN_OR_RETURN(stmt->expr, ParseTuple(false));
    if (SkipName("if")) {
      ERNIE_ASSIGN_OR_RETURN(stmt->filter, ParseExpression(true));
    }
    if (IsName("recursive")) {
      return absl::InvalidArgumentError(Cat(
          "chat template uses an unsupported construct 'recursive for loop' at ", DescribePos(Current().pos)));
    }
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    ++loop_depth_;
    std::string end;
    ERNIE_ASSIGN_OR_RETURN(stmt->body, ParseBody({"endfor", "else"}, &tag, &end));
    --loop_depth_;
    if (end == "else") {
      ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
      ERNIE_ASSIGN_OR_RETURN(stmt->else_body, ParseBody({"endfor"}, &tag, &end));
    }
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<StmtPtr> ParseSet(StmtPtr stmt, const Token& tag) {
    ERNIE_ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(true));
    if (SkipOp("=")) {
      stmt->kind = Stmt::Kind::kSet;
      ERNIE_ASSIGN_OR_RETURN(stmt->expr, ParseTuple(true));
      ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    if (IsOp("|")) {
      return absl::InvalidArgumentError(Cat(
          "chat template uses an unsupported construct 'filtered set block' at ", DescribePos(Current().pos)));
    }
    stmt->kind = Stmt::Kind::kSetBlock;
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    ERNIE_ASSIGN_OR_RETURN(stmt->body, ParseBody({"endset"}, &tag, &end));
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<std::vector<MacroParam>> ParseParams() {
    std::vector<MacroParam> params;
    ERNIE_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!params.empty()) ERNIE_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      MacroParam param;
      ERNIE_ASSIGN_OR_RETURN(param.name, ExpectName());
      if (SkipOp("=")) {
        ERNIE_ASSIGN_OR_RETURN(param.default_value, ParseExpression(true));
      } else if (!params.empty() && params.back().default_value != nullptr) {
        return ErrorAt(Current().pos, "non-default argument follows default argument");
      }
      params.push_back(std::move(param));
    }
    Advance();
    return params;
  }

  absl::StatusOr<StmtPtr> ParseMacro(StmtPtr stmt, const Token& tag) {
    stmt->kind = Stmt::Kind::kMacro;
    ERNIE_ASSIGN_OR_RETURN(stmt->name, ExpectName());
    ERNIE_ASSIGN_OR_RETURN(stmt->params, ParseParams());
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro
    std::string end;
    ERNIE_ASSIGN_OR_RETURN(stmt->body, ParseBody({"endmacro"}, &tag, &end));
    loop_depth_ = saved_loop_depth;
    if (Current().type == TokenType::kName && Current().text == stmt->name) Advance();
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<StmtPtr> ParseCallBlock(StmtPtr stmt, const Token& tag) {
    stmt->kind = Stmt::Kind::kCallBlock;
    if (IsOp("(")) {
      ERNIE_ASSIGN_OR_RETURN(stmt->params, ParseParams());
    }
    ERNIE_ASSIGN_OR_RETURN(stmt->expr, ParseExpression(true));
    if (stmt->expr->kind != Expr::Kind::kCall) return ErrorAt(stmt->expr->pos, "expected a call after '{% call'");
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    ERNIE_ASSIGN_OR_RETURN(stmt->body, ParseBody({"endcall"}, &tag, &end));
    loop_depth_ = saved_loop_depth;
    ERNIE_RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  // ---- expressions -------------------------------------------------------

  static ExprPtr MakeExpr(Expr::Kind kind, SourcePos pos) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->pos = pos;
    return expr;
  }

  // `a, b` without parentheses makes a tuple (as in {{ a, b }} or set x = 1, 2).
  absl::StatusOr<ExprPtr> ParseTuple(bool with_conditional) {
    const SourcePos pos = Current().pos;
    ERNIE_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_conditional));
    if (!IsOp(",")) return first;
    ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, pos);
    tuple->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Current().type == TokenType::kBlockEnd || Current().type == TokenType::kVariableEnd || IsOp(")")) break;
      ERNIE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_conditional));
      tuple->args.push_back(std::move(item));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_conditional) {
    Nesting nesting(this);
    if (!nesting.Deeper()) return TooDeep();
    if (!with_conditional) return ParseOr();
    const SourcePos pos = Current().pos;
    ERNIE_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (SkipName("if")) {
      if (!nesting.Deeper()) return TooDeep();
      ExprPtr conditional = MakeExpr(Expr::Kind::kConditional, pos);
      ERNIE_ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        ERNIE_ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      conditional->args.push_back(std::move(expr));
      conditional->args.push_back(std::move(condition));
      conditional->args.push_back(std::move(otherwise));
      expr = std::move(conditional);
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ERNIE_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    Nesting chain(this);
    while (IsName("or")) {
      if (!chain.Deeper()) return TooDeep();
      const SourcePos pos = Current().pos;
      Advance();
      ERNIE_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      ExprPtr node = MakeExpr(Expr::Kind::kOr, pos);
      node->args.push_back(std::move(left));
      node->args.push_back(std::move(right));
      left = std::move(node);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ERNIE_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    Nesting chain(this);
    while (IsName("and")) {
      if (!chain.Deeper()) return TooDeep();
      const SourcePos pos = Current().pos;
      Advance();
      ERNIE_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      ExprPtr node = MakeExpr(Expr::Kind::kAnd, pos);
      node->args.push_back(std::move(left));
      node->args.push_back(std::move(right));
      left = std::move(node);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      Nesting nesting(this);
      if (!nesting.Deeper()) return TooDeep();
      const SourcePos pos = Current().pos;
      Advance();
      ERNIE_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr node = MakeExpr(Expr::Kind::kNot, pos);
      node->args.push_back(std::move(operand));
      return node;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const SourcePos pos = Current().pos;
    ERNIE_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr compare;
    while (true) {
      std::string op;
      if (Current().type == TokenType::kOperator &&
          (Current().text == "==" || Current().text == "!=" || Current().text == "<" || Current().text == "<=" ||
           Current().text == ">" || Current().text == ">=")) {
        op = Current().text;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Peek(1).type == TokenType::kName && Peek(1).text == "in") {
        op = "not in";
        Advance();
        Advance();
      } else {
        break;
      }
      if (compare == nullptr) {
        compare = MakeExpr(Expr::Kind::kCompare, pos);
        compare->args.push_back(std::move(first));
      }
      ERNIE_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      compare->ops.push_back(op);
      compare->args.push_back(std::move(operand));
    }
    if (compare == nullptr) return first;
    return compare;
  }

  using SubParser = absl::StatusOr<ExprPtr> (Parser::*)();

  absl::StatusOr<ExprPtr> ParseBinaryLevel(std::initializer_list<std::string_view> ops, SubParser next) {
    ERNIE_ASSIGN_OR_RETURN(ExprPtr left, (this->*next)());
    Nesting chain(this);
    while (Current().type == TokenType::kOperator) {
      bool matched = false;
      for (const std::string_view op : ops) matched = matched || Current().text == op;
      if (!matched) break;
      if (!chain.Deeper()) return TooDeep();
      ExprPtr node = MakeExpr(Expr::Kind::kBinary, Current().pos);
      node->name = Current().text;
      Advance();
      ERNIE_ASSIGN_OR_RETURN(ExprPtr right, (this->*next)());
      node->args.push_back(std::move(left));
      node->args.push_back(std::move(right));
      left = std::move(node);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath1() { return ParseBinaryLevel({"+", "-"}, &Parser::ParseConcat); }

  absl::StatusOr<ExprPtr> ParseConcat() {
    const SourcePos pos = Current().pos;
    ERNIE_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!IsOp("~")) return first;
    ExprPtr node = MakeExpr(Expr::Kind::kConcat, pos);
    node->args.push_back(std::move(first));
    while (SkipOp("~")) {
      ERNIE_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
      node->args.push_back(std::move(next));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParseMath2() { return ParseBinaryLevel({"*", "/", "//", "%"}, &Parser::ParsePow); }
  absl::StatusOr<ExprPtr> ParsePow() { return ParseBinaryLevel({"**"}, &Parser::ParseUnaryWithFilters); }
  absl::StatusOr<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filters) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      Nesting nesting(this);
      if (!nesting.Deeper()) return TooDeep();
      node = MakeExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Current().pos);
      Advance();
      ERNIE_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->args.push_back(std::move(operand));
    } else {
      ERNIE_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    ERNIE_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filters) {
      ERNIE_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token token = Current();
    switch (token.type) {
      case TokenType::kName: {
        Advance();
        ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token.pos);
        if (token.text == "true" || token.text == "True") {
          node->literal = Value::Bool(true);
        } else if (token.text == "false" || token.text == "False") {
          node->literal = Value::Bool(false);
        } else if (token.text == "none" || token.text == "None") {
          node->literal = Value::None();
        } else {
          node->kind = Expr::Kind::kName;
          node->name = token.text;
        }
        return node;
      }
      case TokenType::kString: {
        std::string text;
        while (Current().type == TokenType::kString) {  // adjacent literals concatenate
          text += Current().text;
          Advance();
        }
        ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token.pos);
        node->literal = Value::String(std::move(text));
        return node;
      }
      case TokenType::kInteger:
      case TokenType::kFloat: {
        Advance();
        ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token.pos);
        node->literal = token.type == TokenType::kInteger ? Value::Int(token.int_value)
                                                          : Value::Float(token.float_value);
        return node;
      }
      case TokenType::kOperator:
        if (token.text == "(") return ParseParenthesised();
        if (token.text == "[") return ParseListLiteral();
        if (token.text == "{") return ParseDictLiteral();
        break;
      default:
        break;
    }
    return Unexpected("an expression");
  }

  absl::StatusOr<ExprPtr> ParseParenthesised() {
    const SourcePos pos = Current().pos;
    Advance();
    if (SkipOp(")")) return MakeExpr(Expr::Kind::kTuple, pos);
    ERNIE_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(true));
    if (SkipOp(")")) return first;
    ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, pos);
    tuple->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (IsOp(")")) break;
      ERNIE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      tuple->args.push_back(std::move(item));
    }
    ERNIE_RETURN_IF_ERROR(ExpectOp(")"));
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseListLiteral() {
    ExprPtr list = MakeExpr(Expr::Kind::kList, Current().pos);
    Advance();
    while (!IsOp("]")) {
      if (!list->args.empty()) ERNIE_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      ERNIE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      list->args.push_back(std::move(item));
    }
    Advance();
    return list;
  }

  absl::StatusOr<ExprPtr> ParseDictLiteral() {
    ExprPtr dict = MakeExpr(Expr::Kind::kDict, Current().pos);
    Advance();
    while (!IsOp("}")) {
      if (!dict->args.empty()) ERNIE_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      ERNIE_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      ERNIE_RETURN_IF_ERROR(ExpectOp(":"));
      ERNIE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      dict->args.push_back(std::move(key));
      dict->args.push_back(std::move(value));
    }
    Advance();
    return dict;
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    Nesting chain(this);
    while (true) {
      if (!chain.Deeper()) return TooDeep();
      if (IsOp(".")) {
        const SourcePos pos = Current().pos;
        Advance();
        if (Current().type == TokenType::kName) {
          ExprPtr attr = MakeExpr(Expr::Kind::kGetAttr, pos);
          attr->name = Current().text;
          Advance();
          attr->args.push_back(std::move(node));
          node = std::move(attr);
        } else if (Current().type == TokenType::kInteger) {
          ExprPtr item = MakeExpr(Expr::Kind::kGetItem, pos);
          ExprPtr index = MakeExpr(Expr::Kind::kLiteral, Current().pos);
          index->literal = Value::Int(Current().int_value);
          Advance();
          item->args.push_back(std::move(node));
          item->args.push_back(std::move(index));
          node = std::move(item);
        } else {
          return Unexpected("an attribute name");
        }
      } else if (IsOp("[")) {
        ERNIE_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        ERNIE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node) {
    const SourcePos pos = Current().pos;
    Advance();
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Advance();
        is_slice = true;
        if (++part > 2) return ErrorAt(Current().pos, "too many ':' in a slice");
        continue;
      }
      if (parts[part] != nullptr) return Unexpected("':' or ']'");
      ERNIE_ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
      if (IsOp(",")) {
        return ErrorAt(Current().pos, "subscripts with several indices are not supported");
      }
    }
    Advance();
    if (!is_slice) {
      if (parts[0] == nullptr) return ErrorAt(pos, "empty subscript");
      ExprPtr item = MakeExpr(Expr::Kind::kGetItem, pos);
      item->args.push_back(std::move(node));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    ExprPtr slice = MakeExpr(Expr::Kind::kSlice, pos);
    slice->args.push_back(std::move(node));
    for (ExprPtr& p : parts) slice->args.push_back(std::move(p));
    return slice;
  }

  // Parses `(args, name=value)` into node->args[first_arg...] and kwargs.
  absl::Status ParseCallArgs(Expr& node) {
    ERNIE_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ERNIE_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) {
        return absl::InvalidArgumentError(Cat("chat template uses an unsupported construct '",
                                                       Current().text, "args in a call' at ",
                                                       DescribePos(Current().pos)));
      }
      if (Current().type == TokenType::kName && Peek(1).type == TokenType::kOperator && Peek(1).text == "=") {
        std::string key = Current().text;
        Advance();
        Advance();
        ERNIE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        node.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!node.kwargs.empty()) return ErrorAt(Current().pos, "positional argument follows keyword argument");
        ERNIE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        node.args.push_back(std::move(value));
      }
    }
    Advance();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr call = MakeExpr(Expr::Kind::kCall, callee->pos);
    call->args.push_back(std::move(callee));
    ERNIE_RETURN_IF_ERROR(ParseCallArgs(*call));
    return call;
  }

  absl::StatusOr<std::string> ParseDottedName() {
    ERNIE_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(".")) {
      Advance();
      ERNIE_ASSIGN_OR_RETURN(std::string part, ExpectName());
      name += "." + part;
    }
    return name;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    Nesting chain(this);
    while (true) {
      if (!chain.Deeper()) return TooDeep();
      if (IsOp("|")) {
        Advance();
        const SourcePos pos = Current().pos;
        ERNIE_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
        if (!IsKnownFilter(name)) {
          return absl::InvalidArgumentError(Cat("chat template uses an unsupported filter '", name,
                                                         "' at ", DescribePos(pos)));
        }
        ExprPtr filter = MakeExpr(Expr::Kind::kFilter, pos);
        filter->name = name;
        filter->args.push_back(std::move(node));
        if (IsOp("(")) ERNIE_RETURN_IF_ERROR(ParseCallArgs(*filter));
        node = std::move(filter);
      } else if (IsName("is")) {
        Advance();
        const bool negated = SkipName("not");
        const SourcePos pos = Current().pos;
        ERNIE_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
        if (!IsKnownTest(name)) {
          return absl::InvalidArgumentError(Cat("chat template uses an unsupported test '", name,
                                                         "' at ", DescribePos(pos)));
        }
        ExprPtr test = MakeExpr(Expr::Kind::kTest, pos);
        test->name = name;
        test->negated = negated;
        test->args.push_back(std::move(node));
        if (IsOp("(")) {
          ERNIE_RETURN_IF_ERROR(ParseCallArgs(*test));
        } else if ((Current().type == TokenType::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                    !IsName("is") && !IsName("if") && !IsName("in") && !IsName("not")) ||
                   Current().type == TokenType::kString || Current().type == TokenType::kInteger ||
                   Current().type == TokenType::kFloat || IsOp("[") || IsOp("{")) {
          // `x is divisibleby 3`, `x is equalto y`: one argument without parentheses.
          ERNIE_ASSIGN_OR_RETURN(ExprPtr argument, ParsePrimary());
          ERNIE_ASSIGN_OR_RETURN(argument, ParsePostfix(std::move(argument)));
          test->args.push_back(std::move(argument));
        }
        node = std::move(test);
      } else if (IsOp("(")) {
        ERNIE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  // Levels of nesting: blocks, expressions inside one another, unary
  // operators, and each operator, filter, call or subscript chained onto an
  // operand (each makes the tree one level deeper). Parsing, evaluating and
  // freeing a tree recurse once per level, so the depth is bounded: a
  // hostile template is an error rather than a stack overflow. Real chat
  // templates nest fewer than 30 levels.
  class Nesting {
   public:
    explicit Nesting(Parser* parser) : parser_(parser) {}
    ~Nesting() { parser_->nesting_ -= levels_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    // Opens one more level until this object goes; false when too deep.
    [[nodiscard]] bool Deeper() {
      ++levels_;
      return ++parser_->nesting_ <= kMaxNesting;
    }

   private:
    Parser* parser_;
    int levels_ = 0;
  };
  static constexpr int kMaxNesting = 256;
  absl::Status TooDeep() const {
    return ErrorAt(Current().pos, Cat("template nested deeper than ", kMaxNesting, " levels"));
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;    // the current token
  int loop_depth_ = 0;  // for loops enclosing the current statement
  int nesting_ = 0;     // levels of Nesting open now
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(std::string_view source) {
  ERNIE_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  return Parser(std::move(tokens)).ParseAll();
}

}  // namespace ernie::chat_template
