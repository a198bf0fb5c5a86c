#include "pipeline/route_rules.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace inferd {

enum class CompareOp { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };

// A leaf compares two operands; inner nodes are and / or / not.
struct RouteCondition {
  enum class Kind { kCompare, kAnd, kOr, kNot };
  Kind kind = Kind::kCompare;
  std::vector<std::shared_ptr<const RouteCondition>> children;
  struct Operand {
    std::optional<RouteValue> constant;  // else `term`
    RouteTerm term;
  };
  Operand left, right;
  CompareOp op = CompareOp::kEqual;
};

std::string DescribeTarget(const RouteTarget& target) {
  if (target.kind == RouteTarget::Kind::kPool) return "pool " + target.name;
  if (target.kind == RouteTarget::Kind::kCascade) return "cascade";
  return "model " + target.name + (target.version > 0 ? "@" + std::to_string(target.version) : "");
}

namespace {

struct Token {
  enum class Kind { kWord, kNumber, kString, kSymbol, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  double number = 0;
  size_t at = 0;  // character offset, for errors
};

bool IsWordStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

class Parser {
 public:
  Parser(std::string name, const std::string& text) : name_(std::move(name)), text_(text) {}

  StatusOr<RouteRule> Rule(bool is_default) {
    RETURN_IF_ERROR(Tokenize());
    RouteRule rule;
    rule.name = name_;
    if (!is_default) {
      ASSIGN_OR_RETURN(rule.condition, Or());
      if (!Accept("->")) return Error("expected '->' and a target after the condition");
    }
    ASSIGN_OR_RETURN(rule.target, Target(/*allow_cascade=*/true));
    if (Peek().kind != Token::Kind::kEnd) return Error("unexpected text after the target");
    return rule;
  }

  // A target alone (a cascade's tier, a pool's fallback): `model NAME[@V]` or `pool NAME`.
  StatusOr<RouteTarget> TargetOnly() {
    RETURN_IF_ERROR(Tokenize());
    ASSIGN_OR_RETURN(RouteTarget target, Target(/*allow_cascade=*/false));
    if (Peek().kind != Token::Kind::kEnd) return Error("unexpected text after the target");
    return target;
  }

 private:
  Status Tokenize() {
    size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token token;
      token.at = i;
      if (IsWordStart(c)) {
        size_t end = i;
        // A name may hold '-' but not the arrow: "mobilenet->model x" splits before "->".
        while (end < text_.size() && IsWordChar(text_[end]) && text_.compare(end, 2, "->") != 0) ++end;
        token.kind = Token::Kind::kWord;
        token.text = text_.substr(i, end - i);
        i = end;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '-' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        auto [end, error] = std::from_chars(text_.data() + i, text_.data() + text_.size(), token.number);
        if (error != std::errc()) return ErrorAt(i, "a malformed number");
        token.kind = Token::Kind::kNumber;
        token.text = text_.substr(i, static_cast<size_t>(end - (text_.data() + i)));
        i = static_cast<size_t>(end - text_.data());
      } else if (c == '\'') {
        const size_t close = text_.find('\'', i + 1);
        if (close == std::string::npos) return ErrorAt(i, "a string with no closing quote");
        token.kind = Token::Kind::kString;
        token.text = text_.substr(i + 1, close - i - 1);
        i = close + 1;
      } else {
        static constexpr const char* kSymbols[] = {"->", "<=", ">=", "==", "!=", "<", ">", "(", ")", ",", "@"};
        token.kind = Token::Kind::kSymbol;
        for (const char* symbol : kSymbols) {
          if (text_.compare(i, std::char_traits<char>::length(symbol), symbol) == 0) {
            token.text = symbol;
            break;
          }
        }
        if (token.text.empty()) return ErrorAt(i, std::string("an unexpected character '") + c + "'");
        i += token.text.size();
      }
      tokens_.push_back(std::move(token));
    }
    tokens_.push_back({Token::Kind::kEnd, "", 0, text_.size()});
    return Status::Ok();
  }

  const Token& Peek() const { return tokens_[next_]; }
  Token Take() { return tokens_[next_ == tokens_.size() - 1 ? next_ : next_++]; }
  bool Accept(std::string_view text) {
    const Token& token = Peek();
    if ((token.kind == Token::Kind::kSymbol || token.kind == Token::Kind::kWord) && token.text == text) {
      ++next_;
      return true;
    }
    return false;
  }

  Status ErrorAt(size_t at, const std::string& what) const {
    return Status::InvalidArgument("router rule '" + name_ + "': " + what + " at character " + std::to_string(at + 1) +
                                   " of \"" + text_ + "\"");
  }
  Status Error(const std::string& what) const {
    const Token& token = Peek();
    return ErrorAt(token.at, what + (token.kind == Token::Kind::kEnd ? ", found the end" : ", found '" + token.text + "'"));
  }

  using Node = std::shared_ptr<const RouteCondition>;

  StatusOr<Node> Or() { return Joined(RouteCondition::Kind::kOr, "or", [this] { return And(); }); }
  StatusOr<Node> And() { return Joined(RouteCondition::Kind::kAnd, "and", [this] { return Unary(); }); }

  template <typename Next>
  StatusOr<Node> Joined(RouteCondition::Kind kind, std::string_view word, Next next) {
    ASSIGN_OR_RETURN(Node first, next());
    if (Peek().kind != Token::Kind::kWord || Peek().text != word) return first;
    auto joined = std::make_shared<RouteCondition>();
    joined->kind = kind;
    joined->children.push_back(std::move(first));
    while (Accept(word)) {
      ASSIGN_OR_RETURN(Node child, next());
      joined->children.push_back(std::move(child));
    }
    return Node(joined);
  }

  StatusOr<Node> Unary() {
    if (Accept("not")) {
      ASSIGN_OR_RETURN(Node child, Unary());
      auto negated = std::make_shared<RouteCondition>();
      negated->kind = RouteCondition::Kind::kNot;
      negated->children.push_back(std::move(child));
      return Node(negated);
    }
    if (Accept("(")) {
      ASSIGN_OR_RETURN(Node inner, Or());
      if (!Accept(")")) return Error("expected ')'");
      return inner;
    }
    return Comparison();
  }

  StatusOr<Node> Comparison() {
    auto compare = std::make_shared<RouteCondition>();
    const size_t at = Peek().at;
    ASSIGN_OR_RETURN(compare->left, Operand());
    static constexpr std::pair<const char*, CompareOp> kOps[] = {
        {"<", CompareOp::kLess}, {"<=", CompareOp::kLessEqual}, {">", CompareOp::kGreater},
        {">=", CompareOp::kGreaterEqual}, {"==", CompareOp::kEqual}, {"!=", CompareOp::kNotEqual}};
    bool found = false;
    for (const auto& [symbol, op] : kOps) {
      if (Accept(symbol)) {
        compare->op = op;
        found = true;
        break;
      }
    }
    if (!found) return Error("expected a comparison (< <= > >= == !=)");
    ASSIGN_OR_RETURN(compare->right, Operand());
    if (compare->left.constant && compare->right.constant) return ErrorAt(at, "a comparison of two constants");
    const bool ordered = compare->op != CompareOp::kEqual && compare->op != CompareOp::kNotEqual;
    const auto is_string = [](const RouteCondition::Operand& o) {
      return o.constant && std::holds_alternative<std::string>(*o.constant);
    };
    if (ordered && (is_string(compare->left) || is_string(compare->right))) {
      return ErrorAt(at, "a string compared with < or >; strings compare only with == and !=");
    }
    return Node(compare);
  }

  StatusOr<RouteCondition::Operand> Operand() {
    RouteCondition::Operand operand;
    const Token& token = Peek();
    if (token.kind == Token::Kind::kNumber) {
      operand.constant = Take().number;
      return operand;
    }
    if (token.kind == Token::Kind::kString) {
      operand.constant = Take().text;
      return operand;
    }
    ASSIGN_OR_RETURN(operand.term, Term());
    return operand;
  }

  StatusOr<RouteTerm> Term() {
    const Token token = Peek();
    if (token.kind != Token::Kind::kWord) return Error("expected a term (input_bytes, dim, param.NAME, ...)");
    ++next_;
    RouteTerm term;
    const std::string& word = token.text;
    if (word.starts_with("param.") && word.size() > 6) {
      term.kind = RouteTermKind::kParam;
      term.name = word.substr(6);
    } else if (word == "complexity") {
      term.kind = RouteTermKind::kComplexity;
    } else if (word == "input_bytes") {
      term.kind = RouteTermKind::kInputBytes;
      if (Accept("(")) {
        ASSIGN_OR_RETURN(term.name, Word("an input name"));
        if (!Accept(")")) return Error("expected ')'");
      }
    } else if (word == "dim") {
      term.kind = RouteTermKind::kDim;
      if (!Accept("(")) return Error("expected '(' after dim");
      ASSIGN_OR_RETURN(term.name, Word("an input name"));
      if (!Accept(",")) return Error("expected ',' and a dimension index");
      if (Peek().kind != Token::Kind::kNumber || Peek().number < 0 || Peek().number != std::floor(Peek().number)) {
        return Error("expected a dimension index (0, 1, ...)");
      }
      term.index = static_cast<int64_t>(Take().number);
      if (!Accept(")")) return Error("expected ')'");
    } else if (word == "queue_depth" || word == "p99_ms" || word == "predicted_rps") {
      term.kind = word == "queue_depth" ? RouteTermKind::kQueueDepth
                  : word == "p99_ms"    ? RouteTermKind::kP99Ms
                                        : RouteTermKind::kPredictedRps;
      if (!Accept("(")) return Error("expected '(' and a target after " + word);
      ASSIGN_OR_RETURN(term.target, Target());
      if (!Accept(")")) return Error("expected ')'");
    } else {
      next_--;
      return Error("unknown term");
    }
    return term;
  }

  StatusOr<std::string> Word(const std::string& what) {
    if (Peek().kind != Token::Kind::kWord) return Error("expected " + what);
    return Take().text;
  }

  StatusOr<RouteTarget> Target(bool allow_cascade = false) {
    RouteTarget target;
    if (allow_cascade && Accept("cascade")) {
      target.kind = RouteTarget::Kind::kCascade;
      return target;
    }
    if (Accept("model")) {
      ASSIGN_OR_RETURN(target.name, Word("a model name"));
      if (Accept("@")) {
        if (Peek().kind != Token::Kind::kNumber || Peek().number < 1 || Peek().number != std::floor(Peek().number)) {
          return Error("expected a version number after '@'");
        }
        target.version = static_cast<int64_t>(Take().number);
      }
      return target;
    }
    if (Accept("pool")) {
      target.kind = RouteTarget::Kind::kPool;
      ASSIGN_OR_RETURN(target.name, Word("a pool name"));
      return target;
    }
    return Error(allow_cascade ? "expected a target: 'model NAME[@VERSION]', 'pool NAME' or 'cascade'"
                               : "expected a target: 'model NAME[@VERSION]' or 'pool NAME'");
  }

  const std::string name_;
  const std::string& text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

// A string that is a whole number reads as one: request parameters arrive either way.
std::optional<double> AsNumber(const RouteValue& value) {
  if (const double* number = std::get_if<double>(&value)) return *number;
  const std::string& text = std::get<std::string>(value);
  double number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

std::optional<RouteValue> Evaluate(const RouteCondition::Operand& operand, const RouteFacts& facts) {
  if (operand.constant) return operand.constant;
  return facts.Read(operand.term);
}

bool Compare(const RouteCondition& node, const RouteFacts& facts) {
  const auto left = Evaluate(node.left, facts);
  const auto right = Evaluate(node.right, facts);
  if (!left || !right) return false;  // an unknown fact matches nothing
  const auto a = AsNumber(*left), b = AsNumber(*right);
  if (a && b) {
    switch (node.op) {
      case CompareOp::kLess: return *a < *b;
      case CompareOp::kLessEqual: return *a <= *b;
      case CompareOp::kGreater: return *a > *b;
      case CompareOp::kGreaterEqual: return *a >= *b;
      case CompareOp::kEqual: return *a == *b;
      case CompareOp::kNotEqual: return *a != *b;
    }
  }
  const auto* x = std::get_if<std::string>(&*left);
  const auto* y = std::get_if<std::string>(&*right);
  if (x == nullptr || y == nullptr) return node.op == CompareOp::kNotEqual;  // a number is not a string
  if (node.op == CompareOp::kEqual) return *x == *y;
  if (node.op == CompareOp::kNotEqual) return *x != *y;
  return false;
}

bool Matches(const RouteCondition& node, const RouteFacts& facts) {
  switch (node.kind) {
    case RouteCondition::Kind::kCompare: return Compare(node, facts);
    case RouteCondition::Kind::kNot: return !Matches(*node.children[0], facts);
    case RouteCondition::Kind::kAnd:
      for (const auto& child : node.children) {
        if (!Matches(*child, facts)) return false;
      }
      return true;
    case RouteCondition::Kind::kOr:
      for (const auto& child : node.children) {
        if (Matches(*child, facts)) return true;
      }
      return false;
  }
  return false;
}

void CollectTargets(const RouteCondition& node, std::vector<RouteTarget>* out) {
  for (const auto* operand : {&node.left, &node.right}) {
    if (node.kind != RouteCondition::Kind::kCompare || operand->constant) continue;
    const RouteTermKind kind = operand->term.kind;
    if (kind == RouteTermKind::kQueueDepth || kind == RouteTermKind::kP99Ms || kind == RouteTermKind::kPredictedRps) {
      out->push_back(operand->term.target);
    }
  }
  for (const auto& child : node.children) CollectTargets(*child, out);
}

bool ReadsComplexityNode(const RouteCondition& node) {
  for (const auto* operand : {&node.left, &node.right}) {
    if (node.kind == RouteCondition::Kind::kCompare && !operand->constant &&
        operand->term.kind == RouteTermKind::kComplexity) {
      return true;
    }
  }
  for (const auto& child : node.children) {
    if (ReadsComplexityNode(*child)) return true;
  }
  return false;
}

}  // namespace

bool ReadsComplexity(const RouteRule& rule) { return rule.condition && ReadsComplexityNode(*rule.condition); }

StatusOr<RouteRule> ParseRouteRule(const std::string& name, const std::string& text, bool is_default) {
  return Parser(name, text).Rule(is_default);
}

StatusOr<RouteTarget> ParseRouteTarget(const std::string& name, const std::string& text) {
  return Parser(name, text).TargetOnly();
}

bool RuleMatches(const RouteRule& rule, const RouteFacts& facts) {
  return rule.condition == nullptr || Matches(*rule.condition, facts);
}

std::vector<RouteTarget> TargetsRead(const RouteRule& rule) {
  std::vector<RouteTarget> targets;
  if (rule.condition) CollectTargets(*rule.condition, &targets);
  return targets;
}

}  // namespace inferd
