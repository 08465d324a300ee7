#include "gateway/api_shapes.h"

#include <fmt/format.h>

#include "apishape/anthropic.h"
#include "wire/sse.h"

namespace cadenza::gateway {

using ojson = nlohmann::ordered_json;

apishape::Api api_of_route(const std::string& route) {
  if (route == "messages" || route == "count_tokens") return apishape::Api::kMessages;
  if (route == "responses") return apishape::Api::kResponses;
  return apishape::Api::kChat;
}

namespace {

Reply error_of(apishape::Api api, const apishape::ShapeError& e) {
  Reply r;
  r.status = e.status;
  r.body = apishape::error_body(api, e).dump(-1, ' ', false, ojson::error_handler_t::replace);
  return r;
}

}  // namespace

Reply shaped(apishape::Api api, Reply r) {
  if (api == apishape::Api::kChat || r.status < 400) return r;
  Reply out = error_of(api, apishape::from_openai_error(r.status, r.body));
  out.headers = std::move(r.headers);
  return out;
}

std::optional<Reply> ShapedCall::prepare(const std::string& route, const VersionConfig& version,
                                         std::string& target, ojson& body) {
  api_ = api_of_route(route);
  convert_ = api_ != apishape::Api::kChat && version.api == UpstreamApi::chat;
  if (!convert_) return std::nullopt;
  const ojson model = body.contains("model") ? body.at("model") : ojson();
  ojson chat;
  if (route == "count_tokens") {
    return error_of(api_, apishape::invalid("/v1/messages/count_tokens is not available for this "
                                            "model: its upstream speaks only Chat Completions"));
  }
  if (api_ == apishape::Api::kMessages) {
    apishape::ChatRequest c = apishape::messages_to_chat(body);
    if (c.error) return error_of(api_, *c.error);
    chat = std::move(c.chat);
    stream_ = c.stream;
    if (stream_) translator_ = std::make_unique<apishape::MessagesStream>();
  } else {
    std::string previous;
    if (auto e = apishape::previous_response_id(body, previous)) return error_of(api_, *e);
    if (!previous.empty())
      return error_of(api_, apishape::unsupported("previous_response_id",
                                                  "this model's upstream speaks only Chat "
                                                  "Completions and keeps no responses"));
    apishape::ResponsesRequest c = apishape::responses_to_chat(body);
    if (c.error) return error_of(api_, *c.error);
    c.echo["store"] = false;  // nothing keeps it
    info_ = apishape::new_response_info(std::move(c.echo));
    chat = std::move(c.chat);
    stream_ = c.stream;
    if (stream_) translator_ = std::make_unique<apishape::ResponsesStream>(info_);
  }
  if (!model.is_null()) chat["model"] = model;
  target = "/v1/chat/completions";
  body = std::move(chat);
  return std::nullopt;
}

Reply ShapedCall::finish_reply(Reply upstream) {
  if (!convert_ || upstream.status != 200) return shaped(api_, std::move(upstream));
  const ojson chat = ojson::parse(upstream.body, nullptr, false);
  apishape::ChatResult res;
  std::optional<apishape::ShapeError> bad =
      chat.is_discarded() ? std::optional(apishape::ShapeError{502, "the upstream's answer is not JSON",
                                                               "server_error", "", "bad_upstream_answer"})
                          : apishape::decode_chat_body(chat, res);
  if (bad) {
    Reply r = error_of(api_, *bad);
    r.headers = std::move(upstream.headers);
    return r;
  }
  const ojson out = api_ == apishape::Api::kMessages ? apishape::chat_to_message(res)
                                                     : apishape::chat_to_response(res, info_);
  upstream.body = out.dump(-1, ' ', false, ojson::error_handler_t::replace);
  upstream.content_type = "application/json";
  return upstream;
}

std::string ShapedCall::stream_piece(std::string_view bytes) {
  if (!convert_) return std::string(bytes);
  std::string out;
  for (const std::string& data : reader_.feed(bytes)) {
    if (done_) break;
    if (data == "[DONE]") {
      out += translator_->finish();
      done_ = true;
      break;
    }
    const ojson chunk = ojson::parse(data, nullptr, false);
    if (chunk.is_object() && chunk.contains("error")) {  // an upstream's mid-stream error event
      out += translator_->fail(apishape::from_openai_error(500, data));
      done_ = true;
      break;
    }
    if (chunk.is_object()) out += translator_->on_chunk(chunk);
  }
  if (reader_.overflowed() && !done_) {
    out += translator_->fail({502, "an upstream stream event is too large", "server_error", "", ""});
    done_ = true;
  }
  return out;
}

std::string ShapedCall::stream_end() {
  if (!convert_ || done_) return {};
  done_ = true;
  return translator_->finish();  // an upstream that ends without [DONE]
}

std::string ShapedCall::stream_broken(const std::string& message) {
  const apishape::ShapeError e{500, message, "server_error", "", "upstream_stream_broken"};
  if (convert_) {
    if (done_) return {};
    done_ = true;
    return translator_->fail(e);
  }
  if (api_ == apishape::Api::kChat)
    return wire::sse_event(error_json(message, "server_error", "upstream_stream_broken")) +
           wire::sse_event("[DONE]");
  // A Cadenza replica's Messages or Responses stream: that API's error event.
  if (api_ == apishape::Api::kMessages)
    return apishape::named_event("error", apishape::error_body(api_, e));
  return apishape::named_event(
      "error", ojson{{"type", "error"}, {"code", e.code}, {"message", e.message}, {"param", nullptr}});
}

}  // namespace cadenza::gateway
