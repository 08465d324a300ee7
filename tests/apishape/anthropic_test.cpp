#include "apishape/anthropic.h"

#include <gtest/gtest.h>

#include "stream_parse.h"

namespace cadenza::apishape {
namespace {

using ojson = nlohmann::ordered_json;
using testing::chunk;
using testing::parse_events;
using testing::usage_chunk;

ojson parse(const char* s) { return ojson::parse(s); }

TEST(MessagesToChat, StringAndBlockContentSystemAndSampling) {
  const ojson body = parse(R"({
    "model": "tiny", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40, "stream": true,
    "metadata": {"user_id": "u"}})");
  const ChatRequest r = messages_to_chat(body);
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_TRUE(r.stream);
  const ojson& c = r.chat;
  EXPECT_EQ(c["model"], "tiny");
  EXPECT_EQ(c["max_tokens"], 64);
  EXPECT_EQ(c["stop"], ojson::array({"END"}));
  EXPECT_EQ(c["temperature"], 0.5);
  EXPECT_EQ(c["top_p"], 0.9);
  EXPECT_EQ(c["top_k"], 40);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  ASSERT_EQ(c["messages"].size(), 4u);
  EXPECT_EQ(c["messages"][0], parse(R"({"role":"system","content":"Be brief."})"));
  EXPECT_EQ(c["messages"][1], parse(R"({"role":"user","content":"Hi"})"));
  EXPECT_EQ(c["messages"][2]["role"], "assistant");
  EXPECT_EQ(c["messages"][2]["content"][0]["text"], "Hello");
  EXPECT_EQ(c["messages"][3]["content"].size(), 2u);
  EXPECT_FALSE(c.contains("metadata"));
}

TEST(MessagesToChat, ImageBlocksBecomeImageUrlParts) {
  const ChatRequest r = messages_to_chat(parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": [
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
      {"type": "image", "source": {"type": "url", "url": "https://x.org/a.png"}},
      {"type": "text", "text": "two"}]}]})"));
  ASSERT_FALSE(r.error) << r.error->message;
  const ojson& parts = r.chat["messages"][0]["content"];
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], parse(R"({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})"));
  EXPECT_EQ(parts[1], parse(R"({"type": "image_url", "image_url": {"url": "https://x.org/a.png"}})"));
  EXPECT_EQ(parts[2]["text"], "two");
}

TEST(MessagesToChat, ToolsToolUseAndToolResult) {
  const ojson body = parse(R"({
    "max_tokens": 10,
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}, {"type": "text", "text": "Thanks"}]}]})");
  const ChatRequest r = messages_to_chat(body);
  ASSERT_FALSE(r.error) << r.error->message;
  const ojson& c = r.chat;
  EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "get_weather");
  EXPECT_EQ(c["parallel_tool_calls"], false);
  ASSERT_EQ(c["messages"].size(), 4u);
  const ojson& call = c["messages"][1]["tool_calls"][0];
  EXPECT_EQ(call["id"], "toolu_1");
  EXPECT_EQ(ojson::parse(call["function"]["arguments"].get<std::string>()), parse(R"({"city":"Paris"})"));
  EXPECT_EQ(c["messages"][2], parse(R"({"role":"tool","tool_call_id":"toolu_1","content":"sunny"})"));
  EXPECT_EQ(c["messages"][3]["role"], "user");
}

TEST(MessagesToChat, ToolChoiceKinds) {
  for (const auto& [in, out] : std::vector<std::pair<std::string, ojson>>{
           {"auto", "auto"}, {"any", "required"}, {"none", "none"}}) {
    ojson body = parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})");
    body["tool_choice"] = {{"type", in}};
    const ChatRequest r = messages_to_chat(body);
    ASSERT_FALSE(r.error) << in;
    EXPECT_EQ(r.chat["tool_choice"], out) << in;
  }
}

struct BadCase {
  const char* name;
  const char* body;
  const char* param;   // the param the 400 names
  const char* words;   // a fragment of the message
};

class MessagesBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(MessagesBad, Refused) {
  const BadCase& c = GetParam();
  const ojson body = ojson::parse(c.body);
  const ChatRequest r = messages_to_chat(body);
  ASSERT_TRUE(r.error) << c.name;
  EXPECT_EQ(r.error->status, 400);
  EXPECT_EQ(r.error->param, c.param) << r.error->message;
  EXPECT_NE(r.error->message.find(c.words), std::string::npos) << r.error->message;
  const ojson e = error_body(Api::kMessages, *r.error);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
}

INSTANTIATE_TEST_SUITE_P(
    Table, MessagesBad,
    ::testing::Values(
        BadCase{"not_object", R"([1])", "", "JSON object"},
        BadCase{"no_max_tokens", R"({"messages":[{"role":"user","content":"x"}]})", "max_tokens", "required"},
        BadCase{"zero_max_tokens", R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "positive"},
        BadCase{"no_messages", R"({"max_tokens":1})", "messages", "non-empty"},
        BadCase{"empty_messages", R"({"max_tokens":1,"messages":[]})", "messages", "non-empty"},
        BadCase{"bad_role", R"({"max_tokens":1,"messages":[{"role":"system","content":"x"}]})", "messages", "role"},
        BadCase{"content_number", R"({"max_tokens":1,"messages":[{"role":"user","content":5}]})", "messages", "content"},
        BadCase{"image_block", R"({"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
                "messages", "source must be"},
        BadCase{"image_block_assistant", R"({"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"image","source":{}}]}]})",
                "messages[0].content[0].type", "'image' in a assistant message"},
        BadCase{"image_no_data", R"({"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]})",
                "messages", "'media_type' and 'data'"},
        BadCase{"tool_use_in_user", R"({"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}]})",
                "messages[0].content[0].type", "'tool_use' in a user message"},
        BadCase{"tool_use_bad_input", R"({"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":[1]}]}]})",
                "messages", "input must be an object"},
        BadCase{"unknown_field", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"container":"c"})", "container", "not supported"},
        BadCase{"thinking", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":10}})", "thinking", "not supported"},
        BadCase{"server_tool", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]})",
                "tools[0].type", "web_search_20250305"},
        BadCase{"tool_no_schema", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}]})", "tools", "input_schema"},
        BadCase{"tool_choice_string", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})", "tool_choice", "object"},
        BadCase{"tool_choice_tool_no_name", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool"}})", "tool_choice", "name"},
        BadCase{"stop_not_strings", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"stop_sequences":[1]})", "stop_sequences", "strings"},
        BadCase{"temperature_string", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature", "number"},
        BadCase{"stream_string", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream", "boolean"},
        BadCase{"system_image", R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}],"system":[{"type":"image"}]})", "system[0].type", "'image'"},
        BadCase{"model_number", R"({"max_tokens":1,"model":3,"messages":[{"role":"user","content":"x"}]})", "model", "string"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CountTokensToChat, NoMaxTokensNeededButGenerationFieldsRefused) {
  const ojson ok = parse(R"({"model":"m","system":"s","messages":[{"role":"user","content":"x"}]})");
  const ChatRequest r = count_tokens_to_chat(ok);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.chat["messages"].size(), 2u);
  EXPECT_FALSE(r.chat.contains("max_tokens"));
  const ChatRequest bad = count_tokens_to_chat(parse(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->param, "max_tokens");
}

// Built by decoding a chat body (GCC 12's -Wrestrict misfires on short literal assignments here).
ChatResult result(const char* text, const char* finish, std::vector<ChatToolCall> calls = {}) {
  ChatResult r;
  const ojson body = {{"model", "m"},
                      {"choices", ojson::array({{{"index", 0},
                                                 {"message", {{"role", "assistant"}, {"content", text}}},
                                                 {"finish_reason", finish}}})}};
  EXPECT_FALSE(decode_chat_body(body, r));
  r.calls = std::move(calls);
  r.prompt_tokens = 7;
  r.completion_tokens = 3;
  return r;
}

TEST(ChatToMessage, StopReasons) {
  EXPECT_EQ(chat_to_message(result("hi", "stop"))["stop_reason"], "end_turn");
  EXPECT_EQ(chat_to_message(result("hi", "length"))["stop_reason"], "max_tokens");
  ChatResult s = result("hi", "stop");
  s.stop_string = "END";
  const ojson m = chat_to_message(s, "msg_x");
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
  EXPECT_EQ(m["id"], "msg_x");
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["usage"], parse(R"({"input_tokens":7,"cache_read_input_tokens":0,"output_tokens":3})"));
  // Prompt tokens read from the prefix cache are counted apart, as Anthropic does.
  ChatResult cached = result("hi", "stop");
  cached.cached_tokens = 5;
  EXPECT_EQ(chat_to_message(cached)["usage"],
            parse(R"({"input_tokens":2,"cache_read_input_tokens":5,"output_tokens":3})"));
  EXPECT_EQ(m["content"], parse(R"([{"type":"text","text":"hi"}])"));
  const ojson t = chat_to_message(result("", "tool_calls", {{"call_1", "f", R"({"a":1})"}}));
  EXPECT_EQ(t["stop_reason"], "tool_use");
  EXPECT_EQ(t["stop_sequence"], nullptr);
  EXPECT_EQ(t["content"], parse(R"([{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}])"));
  EXPECT_EQ(chat_to_message(result("", "stop"))["id"].get<std::string>().rfind("msg_", 0), 0u);
  // A call cut off by the length limit: max_tokens, and its partial arguments give an empty input.
  const ojson cut = chat_to_message(result("", "length", {{"call_2", "f", R"({"a":)"}}));
  EXPECT_EQ(cut["stop_reason"], "max_tokens");
  EXPECT_EQ(cut["content"][0]["input"], ojson::object());
}

TEST(ChatToMessage, FromChatBody) {
  const ojson body = parse(R"({"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,
    "message":{"role":"assistant","content":"x","tool_calls":[{"id":"call_9","type":"function","function":{"name":"g","arguments":"{\"q\":\"z\"}"}}]},
    "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}})");
  ChatResult r;
  ASSERT_FALSE(decode_chat_body(body, r));
  const ojson m = chat_to_message(r);
  EXPECT_EQ(m["content"].size(), 2u);
  EXPECT_EQ(m["content"][1]["input"]["q"], "z");
  EXPECT_EQ(m["usage"]["input_tokens"], 4);
  ChatResult bad;
  EXPECT_TRUE(decode_chat_body(parse(R"({"choices":[]})"), bad));
}

TEST(MessagesStream, TextSequence) {
  MessagesStream s(5, "msg_1");
  std::string sse = s.on_chunk(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += s.on_chunk(chunk({{"content", "Hel"}}));
  sse += s.on_chunk(chunk({{"content", "lo"}}));
  sse += s.on_chunk(chunk(ojson::object(), "length"));
  sse += s.on_chunk(usage_chunk(5, 2));
  sse += s.finish();
  EXPECT_EQ(s.finish(), "");  // once
  const auto ev = parse_events(sse);
  EXPECT_EQ(testing::names(ev),
            (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
  for (const auto& [name, data] : ev) EXPECT_EQ(data["type"], name);
  EXPECT_EQ(ev[0].second["message"]["id"], "msg_1");
  EXPECT_EQ(ev[0].second["message"]["usage"]["input_tokens"], 5);
  EXPECT_EQ(ev[2].second["content_block"], parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(ev[3].second["delta"], parse(R"({"type":"text_delta","text":"Hel"})"));
  EXPECT_EQ(ev[6].second["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(ev[6].second["usage"]["output_tokens"], 2);
  EXPECT_EQ(s.result().text, "Hello");
}

TEST(MessagesStream, TextThenToolUseBlocks) {
  MessagesStream s;
  std::string sse = s.on_chunk(chunk({{"content", "Let me check."}}));
  sse += s.on_chunk(chunk(parse(R"({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get","arguments":""}}]})")));
  sse += s.on_chunk(chunk(parse(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]})")));
  sse += s.on_chunk(chunk(parse(R"({"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]})")));
  sse += s.on_chunk(chunk(ojson::object(), "tool_calls"));
  sse += s.finish();
  const auto ev = parse_events(sse);
  EXPECT_EQ(testing::names(ev),
            (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(ev[5].second["index"], 1);
  EXPECT_EQ(ev[5].second["content_block"], parse(R"({"type":"tool_use","id":"call_a","name":"get","input":{}})"));
  EXPECT_EQ(ev[6].second["delta"], parse(R"({"type":"input_json_delta","partial_json":"{\"x\":"})"));
  EXPECT_EQ(ev[9].second["delta"]["stop_reason"], "tool_use");
}

TEST(MessagesStream, EmptyStreamStillCloses) {
  MessagesStream s;
  const auto ev = parse_events(s.finish());
  EXPECT_EQ(testing::names(ev), (std::vector<std::string>{"message_start", "ping", "message_delta", "message_stop"}));
  EXPECT_EQ(ev[2].second["delta"]["stop_reason"], "end_turn");
}

TEST(MessagesStream, FailIsAnErrorEvent) {
  MessagesStream s;
  (void)s.on_chunk(chunk({{"content", "x"}}));
  ShapeError e;
  e.status = 500;
  e.message = "boom";
  const auto ev = parse_events(s.fail(e));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].first, "error");
  EXPECT_EQ(ev[0].second["error"]["type"], "api_error");
  EXPECT_EQ(ev[0].second["error"]["message"], "boom");
  EXPECT_EQ(s.finish(), "");
}

TEST(ErrorShapes, StatusToAnthropicType) {
  EXPECT_EQ(anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_EQ(anthropic_error_type(500), "api_error");
  const ShapeError e = from_openai_error(
      429, R"({"error":{"message":"queue full","type":"rate_limit_error","param":null,"code":"queue_full"}})");
  EXPECT_EQ(e.message, "queue full");
  EXPECT_EQ(e.code, "queue_full");
  const ojson o = error_body(Api::kResponses, e);
  EXPECT_EQ(o["error"]["type"], "rate_limit_error");
  EXPECT_EQ(o["error"]["param"], nullptr);
  EXPECT_EQ(from_openai_error(502, "not json").status, 502);
}

}  // namespace
}  // namespace cadenza::apishape
