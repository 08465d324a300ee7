#include "template/parser.h"

#include <algorithm>
#include <string_view>

#include "template/expr_parser.h"
#include "template/try.h"

namespace cadenza::tmpl {
namespace {

// Statements (jinja2/parser.py's parse_* for tags); expressions come from ExprParser.
class Parser : public ExprParser {
 public:
  using ExprParser::ExprParser;

  Result<Body> run() {
    std::string end;
    auto body = subparse({}, &end);
    if (!body) return body.error_value();
    if (cur().kind != TokenKind::kEof) return fail(cur(), "unexpected tag");
    return body;
  }

 private:
  // ---- statements ----

  Result<Body> subparse(Tags end_tags, std::string* found) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.kind) {
        case TokenKind::kText:
          body.push_back(std::make_unique<TextStmt>(pos_of(t), t.text));
          next();
          break;
        case TokenKind::kVarBegin: {
          next();
          TMPL_TRY(e, parse_tuple(false, true, {}, false));
          TMPL_CHECK(expect_kind(TokenKind::kVarEnd, "end of print statement"));
          Pos p = e->pos;
          body.push_back(std::make_unique<OutputStmt>(p, std::move(e)));
          break;
        }
        case TokenKind::kBlockBegin: {
          next();
          if (cur().kind == TokenKind::kName &&
              std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end()) {
            *found = cur().text;
            return body;
          }
          TMPL_TRY(s, parse_statement());
          if (s) body.push_back(std::move(s));
          TMPL_CHECK(expect_kind(TokenKind::kBlockEnd, "end of statement block"));
          break;
        }
        case TokenKind::kEof: {
          if (end_tags.size() == 0) return body;
          std::string want;
          for (auto tag : end_tags) want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
          return fail(t, fmt::format("unexpected end of template, expected {}", want));
        }
        default:
          return fail(t, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  // `{% tag ... %}body{% end %}`: consumes the header's %}, the body and (drop_needle) the end
  // tag's name; the caller's subparse consumes the final %}.
  Result<Body> parse_statements(Tags end_tags, bool drop_needle, std::string* found = nullptr) {
    if (++block_nesting_ > kMaxBlockNesting)
      return fail(cur(), fmt::format("blocks nested too deeply (limit {})", kMaxBlockNesting));
    skip_op(":");
    TMPL_CHECK(expect_kind(TokenKind::kBlockEnd, "end of statement block"));
    std::string end;
    TMPL_TRY(body, subparse(end_tags, &end));
    if (found) *found = end;
    if (drop_needle) next();
    --block_nesting_;
    return body;
  }

  Result<StmtPtr> parse_statement() {
    const Token& t = cur();
    if (t.kind != TokenKind::kName) return fail(t, "tag name expected");
    const std::string& tag = t.text;
    const Pos p = pos_of(t);
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return fail(t, fmt::format("'{}' outside of a loop", tag));
      next();
      return StmtPtr(std::make_unique<LoopControlStmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, p));
    }
    if (tag == "block" || tag == "generation" || tag == "autoescape") {
      next();
      const std::string end = "end" + tag;
      if (tag == "block") {
        TMPL_TRY(name, expect_name());
        (void)name;
        skip_name("scoped");
        skip_name("required");
      } else if (tag == "autoescape") {
        TMPL_TRY(v, parse_expression(true));
        (void)v;
      }
      auto s = std::make_unique<ScopeStmt>(p);
      TMPL_TRY(body, parse_statements({end}, true));
      s->body = std::move(body);
      if (tag == "block" && cur().kind == TokenKind::kName) next();  // {% endblock name %}
      return StmtPtr(std::move(s));
    }
    if (tag == "print") {
      next();
      TMPL_TRY(e, parse_tuple(false, true, {}, false));
      return StmtPtr(std::make_unique<OutputStmt>(p, std::move(e)));
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends")
      return fail(t, fmt::format("'{}' is not supported: a chat template must be self-contained", tag));
    return fail(t, fmt::format("Encountered unknown tag '{}'", tag));
  }

  Result<StmtPtr> parse_for() {
    auto s = std::make_unique<ForStmt>(pos_of(cur()));
    next();
    TMPL_TRY(target, parse_assign_target(true, false, {"in"}));
    s->target = std::move(target);
    if (!skip_name("in")) return fail(cur(), fmt::format("expected 'in', got {}", describe(cur())));
    TMPL_TRY(iter, parse_tuple(false, false, {"recursive"}, false));
    s->iter = std::move(iter);
    if (skip_name("if")) {
      TMPL_TRY(f, parse_expression(true));
      s->filter = std::move(f);
    }
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    std::string found;
    TMPL_TRY(body, parse_statements({"endfor", "else"}, false, &found));
    --loop_depth_;
    s->body = std::move(body);
    next();
    if (found == "else") {
      TMPL_TRY(other, parse_statements({"endfor"}, true));
      s->otherwise = std::move(other);
    }
    return StmtPtr(std::move(s));
  }

  Result<StmtPtr> parse_if() {
    auto s = std::make_unique<IfStmt>(pos_of(cur()));
    next();
    while (true) {
      TMPL_TRY(cond, parse_tuple(false, false, {}, false));
      std::string found;
      TMPL_TRY(body, parse_statements({"elif", "else", "endif"}, false, &found));
      s->branches.emplace_back(std::move(cond), std::move(body));
      next();
      if (found == "elif") continue;
      if (found == "else") {
        TMPL_TRY(other, parse_statements({"endif"}, true));
        s->otherwise = std::move(other);
      }
      break;
    }
    return StmtPtr(std::move(s));
  }

  Result<StmtPtr> parse_set() {
    const Pos p = pos_of(cur());
    next();
    TMPL_TRY(target, parse_assign_target(true, false, {}, /*with_namespace=*/true));
    if (skip_op("=")) {
      auto s = std::make_unique<SetStmt>(p);
      s->target = std::move(target);
      TMPL_TRY(v, parse_tuple(false, true, {}, false));
      s->value = std::move(v);
      return StmtPtr(std::move(s));
    }
    auto s = std::make_unique<SetBlockStmt>(p);
    s->target = std::move(target);
    if (is_op("|")) {
      TMPL_TRY(f, parse_filter(nullptr, false));
      s->filter = std::move(f);
    }
    TMPL_TRY(body, parse_statements({"endset"}, true));
    s->body = std::move(body);
    return StmtPtr(std::move(s));
  }

  Status parse_signature(MacroStmt& m) {
    TMPL_CHECK(expect_op("("));
    while (!is_op(")")) {
      if (!m.params.empty()) TMPL_CHECK(expect_op(","));
      TMPL_TRY(name, expect_name());
      ExprPtr dflt;
      if (skip_op("=")) {
        TMPL_TRY(d, parse_expression(true));
        dflt = std::move(d);
      } else if (!m.params.empty() && m.params.back().second) {
        return fail(cur(), "non-default argument follows default argument");
      }
      m.params.emplace_back(std::move(name), std::move(dflt));
    }
    next();
    return {};
  }

  // Macro bodies are separate functions in Jinja2: loop controls do not cross them.
  Result<Body> parse_macro_body(MacroStmt* m, std::string_view end_tag) {
    macro_stack_.push_back(m);
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_statements({end_tag}, true);
    loop_depth_ = saved_loops;
    macro_stack_.pop_back();
    return body;
  }

  Result<StmtPtr> parse_macro() {
    auto m = std::make_unique<MacroStmt>(pos_of(cur()));
    next();
    TMPL_TRY(name, expect_name());
    m->name = std::move(name);
    TMPL_CHECK(parse_signature(*m));
    TMPL_TRY(body, parse_macro_body(m.get(), "endmacro"));
    m->body = std::move(body);
    return StmtPtr(std::move(m));
  }

  Result<StmtPtr> parse_call_block() {
    auto s = std::make_unique<CallBlockStmt>(pos_of(cur()));
    next();
    s->caller = std::make_unique<MacroStmt>(s->pos);
    s->caller->name = "caller";
    if (is_op("(")) TMPL_CHECK(parse_signature(*s->caller));
    TMPL_TRY(call, parse_expression(true));
    if (call->kind != ExprKind::kCall) return fail(cur(), "expected call");
    s->call.reset(static_cast<CallExpr*>(call.release()));
    TMPL_TRY(body, parse_macro_body(s->caller.get(), "endcall"));
    s->caller->body = std::move(body);
    return StmtPtr(std::move(s));
  }

  Result<StmtPtr> parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(pos_of(cur()));
    next();
    TMPL_TRY(f, parse_filter(nullptr, true));
    s->filter = std::move(f);
    TMPL_TRY(body, parse_statements({"endfilter"}, true));
    s->body = std::move(body);
    return StmtPtr(std::move(s));
  }

  Result<StmtPtr> parse_with() {
    auto s = std::make_unique<WithStmt>(pos_of(cur()));
    next();
    while (cur().kind != TokenKind::kBlockEnd) {
      if (!s->assigns.empty()) TMPL_CHECK(expect_op(","));
      TMPL_TRY(target, parse_assign_target(true, false, {}));
      TMPL_CHECK(expect_op("="));
      TMPL_TRY(v, parse_expression(true));
      s->assigns.emplace_back(std::move(target), std::move(v));
    }
    TMPL_TRY(body, parse_statements({"endwith"}, true));
    s->body = std::move(body);
    return StmtPtr(std::move(s));
  }

  // name | ns.attr | name, (name, name), ...
  Result<Target> parse_assign_target(bool with_tuple, bool name_only, Tags extra_end, bool with_namespace = false) {
    Target t;
    if (name_only || (with_namespace && cur().kind == TokenKind::kName && look().kind == TokenKind::kOp && look().text == ".")) {
      TMPL_TRY(name, expect_name());
      t.name = std::move(name);
      if (!name_only) {
        next();  // '.'
        TMPL_TRY(attr, expect_name());
        t.kind = Target::Kind::kNsAttr;
        t.attr = std::move(attr);
      }
      return t;
    }
    if (!with_tuple) return parse_target_primary();
    // Simplified tuple: primaries separated by commas.
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) TMPL_CHECK(expect_op(","));
      if (is_tuple_end(extra_end)) break;
      TMPL_TRY(item, parse_target_primary());
      items.push_back(std::move(item));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (items.empty()) return fail(cur(), "expected an assignment target");
      return std::move(items[0]);
    }
    t.kind = Target::Kind::kTuple;
    t.items = std::move(items);
    return t;
  }

  Result<Target> parse_target_primary() {
    if (cur().kind == TokenKind::kName) {
      static constexpr std::string_view kConst[] = {"true", "false", "none", "True", "False", "None"};
      if (std::find(std::begin(kConst), std::end(kConst), cur().text) != std::end(kConst))
        return fail(cur(), fmt::format("can't assign to constant '{}'", cur().text));
      Target t;
      t.name = cur().text;
      next();
      return t;
    }
    if (skip_op("(")) {
      if (++nesting_ > kMaxBlockNesting) return fail(cur(), "assignment target nested too deeply");
      TMPL_TRY(t, parse_assign_target(true, false, {}));
      --nesting_;
      TMPL_CHECK(expect_op(")"));
      return t;
    }
    return fail(cur(), fmt::format("can't assign to {}", describe(cur())));
  }

  uint32_t block_nesting_ = 0;  // bounded by kMaxBlockNesting
  int loop_depth_ = 0;          // for break/continue
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace cadenza::tmpl
