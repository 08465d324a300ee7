#include "server/structured_output.h"

#include <cctype>

#include <fmt/format.h>

namespace cadenza::server {

using json = nlohmann::ordered_json;

namespace {

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::optional<ApiError> set_constraint(StructuredOutput& out, OutputConstraint c) {
  if (out.constraint.kind != OutputConstraint::Kind::kNone)
    return bad_request(fmt::format("'{}' and '{}' both constrain the output; send one",
                                   out.constraint.field, c.field),
                       c.field);
  out.constraint = std::move(c);
  return std::nullopt;
}

std::optional<ApiError> read_response_format(const json& v, StructuredOutput& out) {
  const std::string field = "response_format";
  if (!v.is_object() || !v.contains("type") || !v.at("type").is_string())
    return bad_request("'response_format' must be an object with a string 'type'", field);
  const std::string type = v.at("type").get<std::string>();
  if (type == "text") return std::nullopt;
  OutputConstraint c;
  c.field = field;
  if (type == "json_object") {
    c.kind = OutputConstraint::Kind::kJsonObject;
    return set_constraint(out, std::move(c));
  }
  if (type != "json_schema")
    return bad_request(fmt::format("response_format.type '{}' is not one of text, json_object, "
                                   "json_schema",
                                   type),
                       field);
  if (!v.contains("json_schema") || !v.at("json_schema").is_object())
    return bad_request("response_format.json_schema must be an object {name, schema, strict}",
                       field);
  const json& js = v.at("json_schema");
  if (js.contains("name") && !js.at("name").is_string())
    return bad_request("response_format.json_schema.name must be a string", field);
  if (js.contains("strict") && !js.at("strict").is_null()) {
    if (!js.at("strict").is_boolean())
      return bad_request("response_format.json_schema.strict must be a boolean", field);
    c.strict = js.at("strict").get<bool>();
  } else {
    c.strict = false;  // OpenAI: strict is opt-in
  }
  if (!js.contains("schema")) {
    // OpenAI allows an absent schema: any JSON object.
    c.kind = OutputConstraint::Kind::kJsonObject;
    return set_constraint(out, std::move(c));
  }
  if (!js.at("schema").is_object() && !js.at("schema").is_boolean())
    return bad_request("response_format.json_schema.schema must be a JSON schema object", field);
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = js.at("schema");
  return set_constraint(out, std::move(c));
}

std::optional<ApiError> read_string_constraint(const json& v, const std::string& field,
                                               OutputConstraint::Kind kind,
                                               StructuredOutput& out) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    return bad_request(fmt::format("'{}' must be a non-empty string", field), field);
  OutputConstraint c;
  c.kind = kind;
  c.text = v.get<std::string>();
  c.field = field;
  return set_constraint(out, std::move(c));
}

std::optional<ApiError> read_schema_constraint(const json& v, const std::string& field,
                                               StructuredOutput& out) {
  OutputConstraint c;
  c.field = field;
  c.strict = false;
  if (v.is_string()) {  // vLLM accepts the schema as a JSON string too
    c.schema = json::parse(v.get<std::string>(), nullptr, false);
    if (c.schema.is_discarded())
      return bad_request(fmt::format("'{}' is a string that is not JSON", field), field);
  } else {
    c.schema = v;
  }
  if (!c.schema.is_object() && !c.schema.is_boolean())
    return bad_request(fmt::format("'{}' must be a JSON schema object", field), field);
  c.kind = OutputConstraint::Kind::kJsonSchema;
  return set_constraint(out, std::move(c));
}

std::optional<ApiError> read_choice_constraint(const json& v, const std::string& field,
                                               StructuredOutput& out) {
  if (!v.is_array() || v.empty())
    return bad_request(fmt::format("'{}' must be a non-empty array of strings", field), field);
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kChoice;
  c.field = field;
  for (const json& s : v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      return bad_request(fmt::format("'{}' must be a non-empty array of non-empty strings", field),
                         field);
    c.choices.push_back(s.get<std::string>());
  }
  return set_constraint(out, std::move(c));
}

std::optional<ApiError> read_tools(const json& body, StructuredOutput& out) {
  ToolRequest& t = out.tools;
  if (body.contains("tools") && !body.at("tools").is_null()) {
    const json& tools = body.at("tools");
    if (!tools.is_array()) return bad_request("'tools' must be an array", "tools");
    for (size_t i = 0; i < tools.size(); ++i) {
      const json& tool = tools[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!tool.is_object()) return bad_request(where + " must be an object", "tools");
      if (!tool.contains("type") || tool.at("type") != "function")
        return bad_request(where + ".type must be \"function\"", "tools");
      if (!tool.contains("function") || !tool.at("function").is_object())
        return bad_request(where + ".function must be an object", "tools");
      const json& f = tool.at("function");
      ToolFunction fn;
      if (!f.contains("name") || !f.at("name").is_string() ||
          !valid_function_name(f.at("name").get<std::string>()))
        return bad_request(where + ".function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -",
                           "tools");
      fn.name = f.at("name").get<std::string>();
      for (const ToolFunction& other : t.functions)
        if (other.name == fn.name)
          return bad_request(fmt::format("{}.function.name '{}' is declared twice", where, fn.name),
                             "tools");
      if (f.contains("description") && !f.at("description").is_string())
        return bad_request(where + ".function.description must be a string", "tools");
      if (f.contains("parameters") && !f.at("parameters").is_null()) {
        if (!f.at("parameters").is_object())
          return bad_request(where + ".function.parameters must be a JSON schema object", "tools");
        fn.parameters = f.at("parameters");
      } else {
        fn.parameters = json{{"type", "object"}};
      }
      if (f.contains("strict") && !f.at("strict").is_null()) {
        if (!f.at("strict").is_boolean())
          return bad_request(where + ".function.strict must be a boolean", "tools");
        fn.strict = f.at("strict").get<bool>();
      }
      t.functions.push_back(std::move(fn));
    }
  }
  t.choice = t.functions.empty() ? ToolRequest::Choice::kNone : ToolRequest::Choice::kAuto;
  if (body.contains("tool_choice") && !body.at("tool_choice").is_null()) {
    const json& c = body.at("tool_choice");
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s == "none")
        t.choice = ToolRequest::Choice::kNone;
      else if (s == "auto")
        t.choice = ToolRequest::Choice::kAuto;
      else if (s == "required")
        t.choice = ToolRequest::Choice::kRequired;
      else
        return bad_request(
            fmt::format("'tool_choice' '{}' is not one of none, auto, required, or an object", s),
            "tool_choice");
    } else if (c.is_object() && c.contains("function") && c.at("function").is_object() &&
               c.at("function").contains("name") && c.at("function").at("name").is_string()) {
      t.choice = ToolRequest::Choice::kNamed;
      t.named = c.at("function").at("name").get<std::string>();
      bool known = false;
      for (const ToolFunction& f : t.functions) known = known || f.name == t.named;
      if (!known)
        return bad_request(fmt::format("tool_choice names '{}', which is not among 'tools'", t.named),
                           "tool_choice");
    } else {
      return bad_request(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or "
          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice");
    }
    if (t.functions.empty() && t.choice != ToolRequest::Choice::kNone)
      return bad_request("'tool_choice' needs 'tools'", "tool_choice");
  }
  if (body.contains("parallel_tool_calls") && !body.at("parallel_tool_calls").is_null()) {
    if (!body.at("parallel_tool_calls").is_boolean())
      return bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    t.parallel = body.at("parallel_tool_calls").get<bool>();
  }
  return std::nullopt;
}

bool given(const json& body, const char* key) {
  return body.contains(key) && !body.at(key).is_null();
}

}  // namespace

bool has_structured_output_fields(const nlohmann::json& body) {
  for (const char* key : {"response_format", "grammar", "json_schema", "guided_json", "guided_regex",
                          "guided_grammar", "guided_choice", "structured_outputs", "tools",
                          "tool_choice", "parallel_tool_calls"})
    if (body.contains(key)) return true;
  return false;
}

std::optional<ApiError> parse_structured_output(const json& body, Endpoint endpoint,
                                                StructuredOutput& out) {
  out = {};
  if (given(body, "response_format"))
    if (auto e = read_response_format(body.at("response_format"), out)) return e;
  if (given(body, "grammar"))
    if (auto e = read_string_constraint(body.at("grammar"), "grammar",
                                        OutputConstraint::Kind::kGrammar, out))
      return e;
  if (given(body, "json_schema"))
    if (auto e = read_schema_constraint(body.at("json_schema"), "json_schema", out)) return e;
  if (given(body, "guided_json"))
    if (auto e = read_schema_constraint(body.at("guided_json"), "guided_json", out)) return e;
  if (given(body, "guided_regex"))
    if (auto e = read_string_constraint(body.at("guided_regex"), "guided_regex",
                                        OutputConstraint::Kind::kRegex, out))
      return e;
  if (given(body, "guided_grammar"))
    if (auto e = read_string_constraint(body.at("guided_grammar"), "guided_grammar",
                                        OutputConstraint::Kind::kGrammar, out))
      return e;
  if (given(body, "guided_choice"))
    if (auto e = read_choice_constraint(body.at("guided_choice"), "guided_choice", out)) return e;
  if (given(body, "structured_outputs")) {
    const json& so = body.at("structured_outputs");
    if (!so.is_object())
      return bad_request("'structured_outputs' must be an object", "structured_outputs");
    for (const auto& [key, value] : so.items()) {
      const std::string field = "structured_outputs." + key;
      std::optional<ApiError> e;
      if (value.is_null()) continue;
      if (key == "json")
        e = read_schema_constraint(value, field, out);
      else if (key == "regex")
        e = read_string_constraint(value, field, OutputConstraint::Kind::kRegex, out);
      else if (key == "grammar")
        e = read_string_constraint(value, field, OutputConstraint::Kind::kGrammar, out);
      else if (key == "choice")
        e = read_choice_constraint(value, field, out);
      else
        e = bad_request(fmt::format("'{}' is not supported (json, regex, grammar, choice are)",
                                    field),
                        "structured_outputs");
      if (e) return e;
    }
  }
  if (endpoint == Endpoint::kChat) {
    if (auto e = read_tools(body, out)) return e;
  } else if (given(body, "tools") || given(body, "tool_choice")) {
    return bad_request("'tools' are for /v1/chat/completions", "tools");
  }
  if (out.tools.constrained() && out.constraint.kind != OutputConstraint::Kind::kNone)
    return bad_request(fmt::format("tool_choice '{}' and '{}' both constrain the output; send one",
                                   out.tools.choice == ToolRequest::Choice::kRequired
                                       ? "required"
                                       : out.tools.named,
                                   out.constraint.field),
                       "tool_choice");
  return std::nullopt;
}

}  // namespace cadenza::server
