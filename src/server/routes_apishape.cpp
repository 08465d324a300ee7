// The Anthropic Messages and OpenAI Responses routes of Router (routes.h): each request is
// converted to a Chat Completions body by src/apishape, runs through the same generation path as
// /v1/chat/completions (Router::generation, GenerationJob, EngineBridge), and its output is
// translated back by the job's OutputShape.
#include <fmt/format.h>

#include "apishape/anthropic.h"
#include "apishape/responses.h"
#include "server/routes.h"

namespace cadenza::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace http = boost::beast::http;

apishape::Api api_of_path(std::string_view path) {
  if (path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0) return apishape::Api::kMessages;
  if (path == "/v1/responses" || path.rfind("/v1/responses/", 0) == 0) return apishape::Api::kResponses;
  return apishape::Api::kChat;
}

HttpReply shaped_error_reply(apishape::Api api, const ApiError& e) {
  return ordered_json_reply(e.status, shaped_error_body(api, e));
}

namespace {

ApiError to_api_error(const apishape::ShapeError& e) {
  ApiError a;
  a.status = e.status;
  a.message = e.message;
  a.type = e.type;
  a.param = e.param;
  a.code = e.code;
  return a;
}

ApiError not_found(std::string message, std::string code = "not_found") {
  ApiError e;
  e.status = 404;
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

}  // namespace

RouteResult Router::apishape_route(std::string_view target, const HttpRequest& req,
                                   const ModelHandle& model, RouteResult r) const {
  constexpr std::string_view kStored = "/v1/responses/";
  if (target.rfind(kStored, 0) == 0) {
    std::string_view id = target.substr(kStored.size());
    const bool cancel = r.route == "/v1/responses/{id}/cancel";
    if (cancel) id = id.substr(0, id.size() - std::string_view("/cancel").size());
    r.reply = stored_response(id, cancel, req);
    return r;
  }
  // The existing parser's checks (an object, the nesting limit), then again ordered: schemas and
  // tool parameters keep the order the client wrote.
  json checked;
  if (auto e = parse_json_object(req.body(), checked)) {
    r.reply = shaped_error_reply(api_of_path(target), *e);
    return r;
  }
  const ojson body = ojson::parse(req.body(), nullptr, false);
  ModelHandle held = model;
  const auto it = body.find("model");
  const ModelContext* m =
      model_for(it != body.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr,
                held, r);
  if (!m) return r;  // (Router::handle puts a Messages route's error in Anthropic's shape)
  if (target == "/v1/messages") return messages(*m, std::move(held), body, std::move(r));
  if (target == "/v1/messages/count_tokens") {
    r.reply = count_tokens(*m, body);
    return r;
  }
  return responses(*m, std::move(held), body, std::move(r));
}

RouteResult Router::chat_generation(const ModelContext& m, ModelHandle held, const ojson& chat,
                                    RouteResult r) const {
  const std::string raw = chat.dump(-1, ' ', false, ojson::error_handler_t::replace);
  const json body = json::parse(raw);
  RouteResult out = generation(m, body, raw, Endpoint::kChat, std::move(r));
  if (out.generation) {
    out.generation->bridge = m.bridge;
    out.generation->model = std::move(held);
  }
  return out;
}

RouteResult Router::messages(const ModelContext& m, ModelHandle held, const ojson& body,
                             RouteResult r) const {
  apishape::ChatRequest conv = apishape::messages_to_chat(body);
  if (conv.error) {
    r.reply = shaped_error_reply(apishape::Api::kMessages, to_api_error(*conv.error));
    return r;
  }
  r = chat_generation(m, std::move(held), conv.chat, std::move(r));
  if (!r.generation) return r;
  GenerationJob& job = *r.generation->job;
  OutputShape shape;
  shape.api = apishape::Api::kMessages;
  if (conv.stream) {
    shape.stream = std::make_unique<apishape::MessagesStream>(job.prompt_tokens());
  } else {
    shape.body = [](const ojson& chat) {
      apishape::ChatResult res;
      (void)apishape::decode_chat_body(chat, res);  // the job's own body: always a chat.completion
      return apishape::chat_to_message(res);
    };
  }
  job.set_shape(std::move(shape));
  return r;
}

HttpReply Router::count_tokens(const ModelContext& m, const ojson& body) const {
  apishape::ChatRequest conv = apishape::count_tokens_to_chat(body);
  if (conv.error) return shaped_error_reply(apishape::Api::kMessages, to_api_error(*conv.error));
  if (conv.chat.contains("model") && conv.chat.at("model") != m.model_name) {
    ApiError e = not_found(fmt::format("The model '{}' does not exist",
                                       conv.chat.at("model").get<std::string>()),
                           "model_not_found");
    return shaped_error_reply(apishape::Api::kMessages, e);
  }
  ojson messages;
  std::vector<std::string> images;
  if (auto e = normalize_messages(json::parse(conv.chat.at("messages").dump()), messages, &images))
    return shaped_error_reply(apishape::Api::kMessages, *e);
  if (auto e = check_images(m, images)) return shaped_error_reply(apishape::Api::kMessages, *e);
  const ojson tools = conv.chat.contains("tools") ? conv.chat.at("tools") : ojson();
  auto text = m.chat->render(messages, tools, true);
  if (!text) return shaped_error_reply(apishape::Api::kMessages, bad_request(text.error(), "messages"));
  std::vector<int32_t> prompt, positions;  // images count as their placeholder tokens
  if (auto e = chat_prompt(m, *text, images.size(), prompt, positions))
    return shaped_error_reply(apishape::Api::kMessages, *e);
  return ordered_json_reply(200, ojson{{"input_tokens", prompt.size()}});
}

RouteResult Router::responses(const ModelContext& m, ModelHandle held, const ojson& body,
                              RouteResult r) const {
  constexpr apishape::Api kApi = apishape::Api::kResponses;
  auto fail = [&](const ApiError& e) {
    r.reply = shaped_error_reply(kApi, e);
    return std::move(r);
  };
  std::string previous;
  if (auto e = apishape::previous_response_id(body, previous)) return fail(to_api_error(*e));
  std::optional<ResponseStore::Entry> entry;
  if (!previous.empty()) {
    if (!ctx_.responses)
      return fail(bad_request("'previous_response_id' needs a server that stores responses "
                              "(cadenza serve --responses-store N)",
                              "previous_response_id"));
    entry = ctx_.responses->get(previous);
    if (!entry) {
      ApiError e = not_found(fmt::format("Previous response with id '{}' not found.", previous),
                             "previous_response_not_found");
      e.param = "previous_response_id";
      return fail(e);
    }
  }
  apishape::ResponsesRequest conv = apishape::responses_to_chat(body, entry ? &entry->items : nullptr);
  if (conv.error) return fail(to_api_error(*conv.error));
  r = chat_generation(m, std::move(held), conv.chat, std::move(r));
  if (!r.generation) return r;
  GenerationJob& job = *r.generation->job;
  const apishape::ResponseInfo info = apishape::new_response_info(std::move(conv.echo));
  ResponseStore* store = conv.store ? ctx_.responses : nullptr;
  auto items = std::make_shared<const ojson>(std::move(conv.items));
  auto keep = [store, items, id = info.id](const ojson& response) {
    ojson conversation = *items;
    if (response.contains("output"))
      for (const ojson& item : response.at("output")) conversation.push_back(item);
    store->put(id, {response, std::move(conversation)});
  };
  OutputShape shape;
  shape.api = kApi;
  if (conv.stream) {
    auto translator = std::make_unique<apishape::ResponsesStream>(info);
    const apishape::ResponsesStream* s = translator.get();  // owned by the job with the callback
    shape.stream = std::move(translator);
    if (store) shape.finished = [s, keep](const ojson&) { keep(s->final_response()); };
  } else {
    shape.body = [info](const ojson& chat) {
      apishape::ChatResult res;
      (void)apishape::decode_chat_body(chat, res);
      return apishape::chat_to_response(res, info);
    };
    if (store) shape.finished = keep;
  }
  job.set_shape(std::move(shape));
  return r;
}

HttpReply Router::stored_response(std::string_view id_view, bool cancel, const HttpRequest& req) const {
  constexpr apishape::Api kApi = apishape::Api::kResponses;
  const std::string id(id_view);
  const http::verb m = req.method();
  if (!cancel && m != http::verb::get && m != http::verb::head && m != http::verb::delete_) {
    ApiError e;
    e.status = 405;
    e.message = fmt::format("/v1/responses/{{id}} does not allow {}", std::string(req.method_string()));
    e.code = "method_not_allowed";
    HttpReply r = shaped_error_reply(kApi, e);
    r.headers.emplace_back("Allow", "GET, DELETE");
    return r;
  }
  const ApiError missing = not_found(
      ctx_.responses ? fmt::format("Response with id '{}' not found.", id)
                     : fmt::format("Response with id '{}' not found: this server keeps no responses "
                                   "(cadenza serve --responses-store N)",
                                   id));
  if (!ctx_.responses) return shaped_error_reply(kApi, missing);
  if (m == http::verb::delete_) {
    if (!ctx_.responses->erase(id)) return shaped_error_reply(kApi, missing);
    return ordered_json_reply(200, ojson{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  }
  std::optional<ResponseStore::Entry> entry = ctx_.responses->get(id);
  if (!entry) return shaped_error_reply(kApi, missing);
  if (cancel) {
    // Responses run in the foreground here (background is refused), so a stored one has finished.
    ApiError e = bad_request(
        fmt::format("Cannot cancel response '{}': only background responses can be cancelled, "
                    "and it has finished ({})",
                    id, entry->response.value("status", "completed")));
    return shaped_error_reply(kApi, e);
  }
  return ordered_json_reply(200, entry->response);
}

}  // namespace cadenza::server
