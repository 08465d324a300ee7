#include "server/routes.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "server/cache_routes.h"
#include "server/embeddings_routes.h"
#include "server/vision_service.h"
#include "webui/webui.h"

namespace cadenza::server {

using nlohmann::json;
namespace http = boost::beast::http;

HttpReply json_reply(int status, const json& body) {
  HttpReply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

HttpReply ordered_json_reply(int status, const nlohmann::ordered_json& body) {
  HttpReply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return r;
}

HttpReply error_reply(const ApiError& e) { return json_reply(e.status, error_body(e)); }

namespace {

struct RouteSpec {
  const char* path;
  http::verb method;
};

constexpr RouteSpec kRoutes[] = {
    {"/health", http::verb::get},          {"/ready", http::verb::get},
    {"/metrics", http::verb::get},         {"/v1/models", http::verb::get},
    {"/v1/completions", http::verb::post}, {"/v1/chat/completions", http::verb::post},
    {"/tokenize", http::verb::post},       {"/detokenize", http::verb::post},
    {"/v1/embeddings", http::verb::post},  {"/v1/rerank", http::verb::post},
    // src/apishape's APIs (routes_apishape.cpp); {id} routes check their methods themselves.
    {"/v1/messages", http::verb::post},    {"/v1/messages/count_tokens", http::verb::post},
    {"/v1/responses", http::verb::post},   {"/v1/responses/{id}", http::verb::unknown},
    {"/v1/responses/{id}/cancel", http::verb::post},
    {"/v1/cache/clear", http::verb::post},
};

// "/v1/responses/ID" and "/v1/responses/ID/cancel" as their route names (IDs hold no '/').
std::string_view route_name(std::string_view target) {
  constexpr std::string_view kPrefix = "/v1/responses/";
  if (target.rfind(kPrefix, 0) != 0 || target.size() == kPrefix.size()) return target;
  std::string_view rest = target.substr(kPrefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return "/v1/responses/{id}";
  if (slash > 0 && rest.substr(slash) == "/cancel") return "/v1/responses/{id}/cancel";
  return target;
}

}  // namespace

HttpReply Router::models() const {
  if (ctx_.pool) {
    // Router mode: every model the server can serve, and whether it is in memory now.
    json data = json::array();
    for (const ModelStatus& s : ctx_.pool->status()) {
      json entry = {{"id", s.name},
                    {"object", "model"},
                    {"created", ctx_.created},
                    {"owned_by", "cadenza"},
                    {"status", model_state_name(s.state)}};
      if (s.state == ModelState::kLoaded) {
        entry["max_model_len"] = s.max_model_len;
        entry["memory_bytes"] = s.memory_bytes;
      }
      if (!s.last_error.empty()) entry["last_error"] = s.last_error;
      data.push_back(std::move(entry));
    }
    return json_reply(200, {{"object", "list"}, {"data", std::move(data)}});
  }
  json data = json::array({{{"id", ctx_.model_name},
                            {"object", "model"},
                            {"created", ctx_.created},
                            {"owned_by", "cadenza"},
                            {"max_model_len", ctx_.max_model_len}}});
  return json_reply(200, {{"object", "list"}, {"data", std::move(data)}});
}

HttpReply Router::tokenize(const ModelContext& m, const json& body) const {
  auto parsed = parse_tokenize_request(body);
  if (parsed.error) return error_reply(*parsed.error);
  const TokenizeRequest& r = parsed.request;
  std::vector<int32_t> tokens;
  if (r.has_messages) {
    auto text = m.chat->render(r.messages, r.tools, r.add_generation_prompt);
    if (!text) return error_reply(bad_request(text.error(), "messages"));
    tokens = r.add_special.value_or(false) ? m.tokenizer->encode(*text, true, true)
                                           : m.chat->encode(*text);
  } else {
    tokens = m.tokenizer->encode(r.prompt, r.add_special.value_or(true), true);
  }
  return json_reply(200, {{"tokens", tokens},
                          {"count", tokens.size()},
                          {"max_model_len", m.max_model_len}});
}

HttpReply Router::detokenize(const ModelContext& m, const json& body) const {
  auto parsed = parse_detokenize_request(body);
  if (parsed.error) return error_reply(*parsed.error);
  for (int32_t t : parsed.tokens)
    if (t >= m.tokenizer->n_vocab())
      return error_reply(bad_request(
          fmt::format("token id {} is outside the vocabulary ({} tokens)", t,
                      m.tokenizer->n_vocab()),
          "tokens"));
  return json_reply(200, {{"prompt", m.tokenizer->decode(parsed.tokens)}});
}

std::optional<ApiError> check_images(const ModelContext& m, const std::vector<std::string>& urls) {
  if (urls.empty()) return std::nullopt;
  if (m.vision == nullptr)
    return bad_request(fmt::format("the model '{}' takes no images (a server started without "
                                   "--mmproj)", m.model_name),
                       "messages");
  return m.vision->check(urls);
}

std::optional<ApiError> chat_prompt(const ModelContext& m, const std::string& text, size_t n_images,
                                    std::vector<int32_t>& prompt, std::vector<int32_t>& positions) {
  if (n_images == 0) {
    prompt = m.chat->encode(text);
    return std::nullopt;
  }
  // The text between the markers is tokenized piece by piece (the first with the BOS rule);
  // each marker becomes the image's placeholder tokens (ids ignored: embeddings replace them).
  // The projector's text around each image (Gemma 3: <start_of_image> before, <end_of_image>
  // after) joins the text pieces beside it.
  const int32_t per_image = m.vision->tokens_per_image();
  const vision::VisionConfig& vc = m.vision->config();
  size_t from = 0;
  for (size_t at = text.find(kImageMarker);; at = text.find(kImageMarker, from)) {
    std::string piece = text.substr(from, at == std::string::npos ? std::string::npos : at - from);
    if (from > 0) piece.insert(0, vc.image_end);
    if (at != std::string::npos) piece += vc.image_begin;
    std::vector<int32_t> ids = from == 0 ? m.chat->encode(piece) : m.tokenizer->encode(piece, false, true);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
    if (at == std::string::npos) break;
    positions.push_back(static_cast<int32_t>(prompt.size()));
    prompt.insert(prompt.end(), static_cast<size_t>(per_image), 0);
    from = at + kImageMarker.size();
  }
  if (positions.size() != n_images)
    return bad_request(fmt::format("the chat template placed {} of the {} images (it dropped or "
                                   "repeated message content)", positions.size(), n_images),
                       "messages");
  return std::nullopt;
}

RouteResult Router::generation(const ModelContext& m, const json& body,
                               const std::string& raw_body, Endpoint endpoint,
                               RouteResult r) const {
  auto fail = [&](ApiError e) {
    r.reply = error_reply(e);
    return std::move(r);
  };
  if (!m.generates)
    return fail(bad_request(fmt::format("the model '{}' is an encoder: it computes embeddings, not "
                                        "text; use /v1/embeddings (or /v1/rerank)",
                                        m.model_name), "model"));
  auto parsed = parse_completion_request(body, endpoint);
  if (parsed.error) return fail(*parsed.error);
  CompletionRequest& req = parsed.request;
  if (!req.model.empty() && req.model != m.model_name)
    return fail(api_error(404, fmt::format("The model '{}' does not exist", req.model),
                          "invalid_request_error", "model_not_found"));

  StructuredOutput so;
  if (has_structured_output_fields(body)) {
    // Again, ordered: a schema's properties are generated in the order the client wrote them.
    const auto ordered = nlohmann::ordered_json::parse(raw_body, nullptr, false);
    if (ordered.is_discarded()) return fail(bad_request("the request body is not valid JSON"));
    if (auto e = parse_structured_output(ordered, endpoint, so)) return fail(*e);
  }
  nlohmann::ordered_json kwargs;
  if (body.contains("chat_template_kwargs") && !body.at("chat_template_kwargs").is_null()) {
    if (!body.at("chat_template_kwargs").is_object())
      return fail(bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs"));
    kwargs = nlohmann::ordered_json::parse(body.at("chat_template_kwargs").dump());
  }

  std::vector<int32_t> prompt;
  std::vector<int32_t> image_positions;  // where each image's placeholders start in `prompt`
  OutputParsing parsing;
  if (endpoint == Endpoint::kChat) {
    if (auto e = check_images(m, req.image_urls)) return fail(*e);
    auto text = m.chat->render(req.messages, req.tools, true, kwargs);
    if (!text) return fail(bad_request(text.error(), "messages"));
    if (auto e = chat_prompt(m, *text, req.image_urls.size(), prompt, image_positions))
      return fail(*e);
    parsing.tools = so.tools.calls_possible() ? m.tool_format : toolcall::ToolCallFormat::kNone;
    parsing.options.reasoning = m.reasoning;
    parsing.options.starts_in_reasoning = toolcall::prompt_opens_reasoning(*text);
  } else if (req.prompt_is_tokens) {
    prompt = req.prompt_tokens;
  } else {
    prompt = m.tokenizer->encode(req.prompt_text, true, true);
  }
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (req.priority != 0 && !ctx_.priority_scheduling)
    return fail(bad_request(
        "'priority' needs a server started with --scheduling-policy priority (this one "
        "schedules first come, first served)",
        "priority"));
  SamplingParams p = req.sampling;
  p.n = req.n;
  p.logprobs = req.logprobs;
  // Defaults: OpenAI's 16 for legacy completions; the rest of the context for chat. When the
  // prompt leaves no room, validate_request says so (its prompt rule comes before max_tokens').
  if (!req.given.max_tokens) {
    const int64_t room = std::max<int64_t>(m.max_model_len - n_prompt, 0);
    p.max_tokens =
        static_cast<int32_t>(endpoint == Endpoint::kChat ? room : std::min<int64_t>(16, room));
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  if (!req.given.seed) p.seed = rng();
  parsing.options.id_seed = rng();
  // Markers of tool calls and reasoning may be control tokens: the parser must see their text.
  if (parsing.active()) p.skip_special_tokens = false;
  const Tokenizer& tok = *m.tokenizer;
  auto gbnf = output_gbnf(so, m.tool_format, [&tok](std::string_view text) -> std::optional<int32_t> {
    const std::optional<int32_t> id = tok.find_token(text);
    if (id && tok.is_control(*id)) return id;
    return std::nullopt;
  });
  if (auto* e = std::get_if<ApiError>(&gbnf)) return fail(*e);
  if (const std::string& text = std::get<std::string>(gbnf); !text.empty()) {
    if (!m.grammars)
      return fail(bad_request("structured output is not available on this server",
                              so.tools.constrained() ? "tool_choice" : so.constraint.field));
    auto g = m.grammars->get(text, so.tools.constrained() ? "tool_choice" : so.constraint.field);
    if (auto* e = std::get_if<ApiError>(&g)) return fail(*e);
    p.grammar = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(std::move(g));
  }
  // The same rules as EngineCore::add_request, checked here so that the 400 names the parameter.
  const RequestLimits limits{m.tokenizer->n_vocab(), m.max_model_len};
  if (auto e = validate_request(prompt, p, limits)) {
    if (e->param == "prompt" && endpoint == Endpoint::kChat) e->param = "messages";
    return fail(bad_request(*e));
  }

  GenerationPlan plan;
  plan.job = std::make_unique<GenerationJob>(req, m.model_name, static_cast<int32_t>(n_prompt),
                                             *m.tokenizer, std::move(parsing));
  // One engine request; n > 1 runs as n samples forked from the computed prompt (choice i samples
  // with seed + i: reproducible with a seed).
  GenInput in;
  in.prompt = std::move(prompt);
  in.params = std::move(p);
  in.priority = req.priority;
  plan.inputs.push_back(std::move(in));
  if (!image_positions.empty()) {
    plan.prepare = [vision = m.vision, urls = std::move(req.image_urls),
                    positions = std::move(image_positions)](std::function<void(PreparedInputs)> done) {
      const int32_t n = vision->tokens_per_image();
      const bool bidirectional = vision->config().bidirectional_image;
      vision->encode(urls, [done = std::move(done), positions, n, bidirectional](VisionResult v) {
        PreparedInputs p;
        p.error = std::move(v.error);
        for (size_t i = 0; !p.error && i < v.images.size(); ++i)
          p.images.push_back({positions[i], n, v.images[i].digest, std::move(v.images[i].embeddings),
                              bidirectional});
        done(std::move(p));
      });
    };
  }
  r.generation = std::move(plan);
  return r;
}

const ModelContext* Router::model_for(const std::string* name, ModelHandle& held,
                                      RouteResult& r) const {
  if (!ctx_.pool) return &ctx_;
  if (!name || name->empty()) {
    r.reply = error_reply(bad_request(
        "'model' is required: this server serves several models (GET /v1/models lists them)",
        "model"));
    return nullptr;
  }
  if (!held || held->context().model_name != *name) {
    ModelPool::FindResult found = ctx_.pool->find(*name);
    if (found.found == ModelPool::Found::kUnknown) {
      r.reply = error_reply(api_error(404, fmt::format("The model '{}' does not exist", *name),
                                      "invalid_request_error", "model_not_found"));
      return nullptr;
    }
    if (found.found == ModelPool::Found::kNotLoaded) {
      r.await_model = *name;
      return nullptr;
    }
    held = std::move(found.model);
  }
  return &held->context();
}

RouteResult Router::handle(const HttpRequest& req, const ModelHandle& model) const {
  RouteResult r = route(req, model);
  std::string_view target = to_sv(req.target());
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  const apishape::Api api = api_of_path(target);
  // Errors of the Messages API's routes in Anthropic's shape (the others are OpenAI's already).
  if (api == apishape::Api::kMessages && r.reply && r.reply->status >= 400) {
    const apishape::ShapeError e = apishape::from_openai_error(r.reply->status, r.reply->body);
    r.reply->body = apishape::error_body(api, e).dump(-1, ' ', false,
                                                      nlohmann::ordered_json::error_handler_t::replace);
  }
  return r;
}

RouteResult Router::route(const HttpRequest& req, const ModelHandle& model) const {
  RouteResult r;
  std::string_view target = to_sv(req.target());
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  if (ctx_.webui && webui::is_console_path(target)) {
    // The web console: static files, no API key (the page asks for one when the API needs it).
    r.route = "/webui";
    const auto inm = req.find(http::field::if_none_match);
    webui::Response w = webui::serve(to_sv(req.method_string()), target,
                                     inm == req.end() ? std::string_view{} : to_sv(inm->value()));
    r.reply = HttpReply{w.status, std::string(w.body), std::move(w.content_type), std::move(w.headers)};
    return r;
  }
  const RouteSpec* spec = nullptr;
  const std::string_view name = route_name(target);
  for (const auto& s : kRoutes)
    if (name == s.path) spec = &s;
  if (!spec) {
    r.route = "other";
    r.reply = error_reply(api_error(404, fmt::format("no route for {}", std::string(target)),
                                    "invalid_request_error", "not_found"));
    return r;
  }
  r.route = spec->path;
  if (spec->method != http::verb::unknown && req.method() != spec->method &&
      !(spec->method == http::verb::get && req.method() == http::verb::head)) {
    r.reply = error_reply(api_error(
        405, fmt::format("{} does not allow {}", spec->path, std::string(req.method_string())),
        "invalid_request_error", "method_not_allowed"));
    r.reply->headers.emplace_back("Allow", std::string(http::to_string(spec->method)));
    return r;
  }
  if (target == "/health") {
    r.reply = json_reply(200, {{"status", "ok"}});
    return r;
  }
  if (target == "/metrics") {
    r.reply = HttpReply{200, ctx_.metrics->render(), "text/plain; version=0.0.4; charset=utf-8", {}};
    return r;
  }
  // Router mode is ready as soon as it listens: models load on demand (a request waits for its).
  const bool ready = (ctx_.pool || ctx_.bridge->ready()) && !ctx_.draining.load();
  if (target == "/ready") {
    r.reply = ready ? json_reply(200, {{"status", "ready"}})
                    : error_reply(api_error(503,
                                            ctx_.draining.load() ? "the server is draining"
                                                                 : "the server is starting",
                                            "service_unavailable", "not_ready"));
    return r;
  }
  auto auth = req.find(http::field::authorization);
  auto x_api_key = req.find("x-api-key");  // Anthropic's header, accepted on every route
  const bool key_ok = auth != req.end() ? ctx_.keys.check(to_sv(auth->value()))
                      : x_api_key != req.end() ? ctx_.keys.check_key(to_sv(x_api_key->value()))
                                               : ctx_.keys.check({});
  if (!key_ok) {
    r.reply = error_reply(api_error(401, "Incorrect or missing API key (Authorization: Bearer KEY or x-api-key: KEY)",
                                    "authentication_error", "invalid_api_key"));
    return r;
  }
  if (target == "/v1/models") {
    r.reply = models();
    return r;
  }
  if (!ready) {
    r.reply = error_reply(api_error(
        503, ctx_.draining.load() ? "the server is draining" : "the server is starting",
        "service_unavailable", "not_ready"));
    r.reply->headers.emplace_back("Retry-After", "1");
    return r;
  }
  if (api_of_path(target) != apishape::Api::kChat) return apishape_route(target, req, model, std::move(r));
  json body;
  // /v1/cache/clear may come without a body (every tier).
  if (target == "/v1/cache/clear" && req.body().empty()) body = json::object();
  else if (auto e = parse_json_object(req.body(), body)) {
    r.reply = error_reply(*e);
    return r;
  }
  // The request's model: the one model, or (router mode) the body's `model` from the pool.
  ModelHandle held = model;
  const auto it = body.find("model");
  const ModelContext* m =
      model_for(it != body.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr,
                held, r);
  if (!m) return r;
  if (target == "/v1/cache/clear") {
    cache_clear_route(*m, std::move(held), body, r);
    return r;
  }
  if (target == "/tokenize") {
    r.reply = tokenize(*m, body);
    return r;
  }
  if (target == "/detokenize") {
    r.reply = detokenize(*m, body);
    return r;
  }
  if (target == "/v1/embeddings" || target == "/v1/rerank") {
    if (target == "/v1/rerank")
      rerank_route(*m, std::move(held), body, r);
    else
      embeddings_route(*m, std::move(held), body, r);
    return r;
  }
  r = generation(*m, body, req.body(),
                 target == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions,
                 std::move(r));
  if (r.generation) {
    r.generation->bridge = m->bridge;
    r.generation->model = std::move(held);
  }
  return r;
}

}  // namespace cadenza::server
