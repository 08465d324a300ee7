#include "apishape/responses.h"

#include <gtest/gtest.h>

#include "stream_parse.h"

namespace cadenza::apishape {
namespace {

using ojson = nlohmann::ordered_json;
using testing::chunk;
using testing::parse_events;
using testing::usage_chunk;

ojson parse(const char* s) { return ojson::parse(s); }

TEST(ResponsesToChat, StringInputAndSettings) {
  const ResponsesRequest r = responses_to_chat(parse(R"({"model":"tiny","input":"Hi","instructions":"Be brief.",
      "max_output_tokens":32,"temperature":0.2,"top_p":0.5,"stream":true,"store":false,"metadata":{"k":"v"},"user":"u"})"));
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.chat["model"], "tiny");
  EXPECT_EQ(r.chat["max_tokens"], 32);
  EXPECT_EQ(r.chat["temperature"], 0.2);
  EXPECT_EQ(r.chat["stream_options"]["include_usage"], true);
  EXPECT_EQ(r.chat["messages"], parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
  EXPECT_EQ(r.items, parse(R"([{"type":"message","role":"user","content":"Hi"}])"));
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 32);
  EXPECT_EQ(r.echo["store"], false);
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
}

TEST(ResponsesToChat, InputImageBecomesAnImageUrlPart) {
  const ResponsesRequest r = responses_to_chat(parse(R"({"input":[{"role":"user","content":[
      {"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"auto"},
      {"type":"input_text","text":"what"}]}]})"));
  ASSERT_FALSE(r.error) << r.error->message;
  const auto& parts = r.chat["messages"][0]["content"];
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]["type"], "image_url");
  EXPECT_EQ(parts[0]["image_url"]["url"], "data:image/png;base64,AAAA");
  EXPECT_EQ(parts[1]["text"], "what");
}

TEST(ResponsesToChat, ItemsRolesPartsAndFunctionCalls) {
  const ResponsesRequest r = responses_to_chat(parse(R"({"input":[
      {"role":"developer","content":"Rules"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]},
      {"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},
      {"type":"function_call","call_id":"call_2","name":"g","arguments":"{\"x\":1}"},
      {"type":"function_call_output","call_id":"call_1","output":"42"}],
    "tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],
    "tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false})"));
  ASSERT_FALSE(r.error) << r.error->message;
  const ojson& m = r.chat["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], parse(R"({"role":"system","content":"Rules"})"));
  EXPECT_EQ(m[1]["content"].size(), 2u);
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"][0]["text"], "ok");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // both calls join the assistant's turn
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(m[3], parse(R"({"role":"tool","tool_call_id":"call_1","content":"42"})"));
  EXPECT_EQ(r.chat["tools"][0], parse(R"({"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}})"));
  EXPECT_EQ(r.chat["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(r.chat["parallel_tool_calls"], false);
  EXPECT_EQ(r.items.size(), 6u);
}

TEST(ResponsesToChat, TextFormatJsonSchema) {
  const ResponsesRequest r = responses_to_chat(parse(R"({"input":"x","text":{"format":{"type":"json_schema","name":"p",
      "schema":{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}},"strict":true}}})"));
  ASSERT_FALSE(r.error) << r.error->message;
  const ojson& rf = r.chat["response_format"];
  EXPECT_EQ(rf["type"], "json_schema");
  EXPECT_EQ(rf["json_schema"]["name"], "p");
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"].begin().key(), "b");  // order kept
  EXPECT_EQ(responses_to_chat(parse(R"({"input":"x","text":{"format":{"type":"json_object"}}})")).chat["response_format"],
            parse(R"({"type":"json_object"})"));
  EXPECT_FALSE(responses_to_chat(parse(R"({"input":"x","text":{"format":{"type":"text"}}})")).chat.contains("response_format"));
}

TEST(ResponsesToChat, PreviousItemsArePrefix) {
  const ojson prev = parse(R"([{"type":"message","role":"user","content":"1"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"one"}]}])");
  const ResponsesRequest r = responses_to_chat(parse(R"({"input":"2","previous_response_id":"resp_a","instructions":"I"})"), &prev);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.previous_response_id, "resp_a");
  EXPECT_EQ(r.items.size(), 3u);
  const ojson& m = r.chat["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["content"][0]["text"], "one");
  EXPECT_EQ(m[3]["content"], "2");
  std::string id;
  EXPECT_TRUE(previous_response_id(parse(R"({"previous_response_id":5})"), id));
  EXPECT_FALSE(previous_response_id(parse(R"({"previous_response_id":"resp_b"})"), id));
  EXPECT_EQ(id, "resp_b");
}

struct BadCase {
  const char* name;
  const char* body;
  const char* param;
};

class ResponsesBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(ResponsesBad, Refused) {
  const BadCase& c = GetParam();
  const ResponsesRequest r = responses_to_chat(ojson::parse(c.body));
  ASSERT_TRUE(r.error) << c.name;
  EXPECT_EQ(r.error->status, 400);
  EXPECT_EQ(r.error->param, c.param) << r.error->message;
  const ojson e = error_body(Api::kResponses, *r.error);
  EXPECT_EQ(e["error"]["message"], r.error->message);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
}

INSTANTIATE_TEST_SUITE_P(
    Table, ResponsesBad,
    ::testing::Values(
        BadCase{"no_input", R"({"model":"m"})", "input"},
        BadCase{"input_number", R"({"input":3})", "input"},
        BadCase{"input_empty", R"({"input":[]})", "input"},
        BadCase{"item_not_object", R"({"input":[1]})", "input"},
        BadCase{"bad_role", R"({"input":[{"role":"tool","content":"x"}]})", "input"},
        BadCase{"image_file_id", R"({"input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]})", "input[0].content[0].file_id"},
        BadCase{"image_no_url", R"({"input":[{"role":"user","content":[{"type":"input_image"}]}]})", "input"},
        BadCase{"reasoning_item", R"({"input":[{"type":"reasoning","summary":[]}]})", "input[0].type"},
        BadCase{"call_no_args", R"({"input":[{"type":"function_call","call_id":"c","name":"f"}]})", "input"},
        BadCase{"output_not_string", R"({"input":[{"type":"function_call_output","call_id":"c","output":{}}]})", "input"},
        BadCase{"web_search_tool", R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0].type"},
        BadCase{"tool_choice_bad", R"({"input":"x","tool_choice":"sometimes"})", "tool_choice"},
        BadCase{"max_output_tokens_zero", R"({"input":"x","max_output_tokens":0})", "max_output_tokens"},
        BadCase{"temperature_string", R"({"input":"x","temperature":"warm"})", "temperature"},
        BadCase{"store_string", R"({"input":"x","store":"yes"})", "store"},
        BadCase{"background", R"({"input":"x","background":true})", "background"},
        BadCase{"reasoning", R"({"input":"x","reasoning":{"effort":"low"}})", "reasoning"},
        BadCase{"include", R"({"input":"x","include":["file_search_call.results"]})", "include"},
        BadCase{"truncation_auto", R"({"input":"x","truncation":"auto"})", "truncation"},
        BadCase{"unknown", R"({"input":"x","conversation":"c"})", "conversation"},
        BadCase{"format_regex", R"({"input":"x","text":{"format":{"type":"grammar"}}})", "text.format.type"},
        BadCase{"schema_missing", R"({"input":"x","text":{"format":{"type":"json_schema","name":"n"}}})", "text"},
        BadCase{"instructions_number", R"({"input":"x","instructions":1})", "instructions"},
        BadCase{"prev_number", R"({"input":"x","previous_response_id":1})", "previous_response_id"}),
    [](const auto& info) { return std::string(info.param.name); });

ResponseInfo info() {
  ResponseInfo i = new_response_info(responses_to_chat(parse(R"({"input":"x","max_output_tokens":9})")).echo);
  i.id = "resp_1";
  return i;
}

TEST(ChatToResponse, TextAndCallsAndIncomplete) {
  ChatResult r;
  r.model = "m";
  r.text = "Hello";
  r.finish_reason = "stop";
  r.prompt_tokens = 3;
  r.completion_tokens = 2;
  const ojson o = chat_to_response(r, info());
  EXPECT_EQ(o["id"], "resp_1");
  EXPECT_EQ(o["object"], "response");
  EXPECT_EQ(o["status"], "completed");
  EXPECT_EQ(o["model"], "m");
  EXPECT_EQ(o["max_output_tokens"], 9);
  ASSERT_EQ(o["output"].size(), 1u);
  EXPECT_EQ(o["output"][0]["type"], "message");
  EXPECT_EQ(o["output"][0]["content"][0], parse(R"({"type":"output_text","text":"Hello","annotations":[]})"));
  EXPECT_EQ(o["usage"]["total_tokens"], 5);
  EXPECT_EQ(o["usage"]["input_tokens_details"]["cached_tokens"], 0);
  // The chat body's usage.prompt_tokens_details.cached_tokens is carried over.
  ojson cached_body = parse(R"({"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],
                               "usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,
                                        "prompt_tokens_details":{"cached_tokens":32}}})");
  ChatResult c;
  ASSERT_FALSE(decode_chat_body(cached_body, c));
  EXPECT_EQ(c.cached_tokens, 32);
  EXPECT_EQ(chat_to_response(c, info())["usage"]["input_tokens_details"]["cached_tokens"], 32);
  r.finish_reason = "length";
  const ojson inc = chat_to_response(r, info());
  EXPECT_EQ(inc["status"], "incomplete");
  EXPECT_EQ(inc["incomplete_details"]["reason"], "max_output_tokens");
  r.text.clear();
  r.finish_reason = "tool_calls";
  r.calls = {{"call_1", "f", "{\"a\":1}"}};
  const ojson call = chat_to_response(r, info());
  ASSERT_EQ(call["output"].size(), 1u);
  EXPECT_EQ(call["output"][0]["type"], "function_call");
  EXPECT_EQ(call["output"][0]["call_id"], "call_1");
  EXPECT_EQ(call["output"][0]["arguments"], "{\"a\":1}");
}

void expect_sequence_numbers(const std::vector<testing::Event>& ev) {
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].second["sequence_number"], i) << ev[i].first;
    EXPECT_EQ(ev[i].second["type"], ev[i].first);
  }
}

TEST(ResponsesStream, TextSequence) {
  ResponsesStream s(info());
  std::string sse = s.on_chunk(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += s.on_chunk(chunk({{"content", "Hel"}}));
  sse += s.on_chunk(chunk({{"content", "lo"}}));
  sse += s.on_chunk(chunk(ojson::object(), "stop"));
  sse += s.on_chunk(usage_chunk(4, 2));
  sse += s.finish();
  const auto ev = parse_events(sse);
  EXPECT_EQ(testing::names(ev),
            (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                      "response.content_part.added", "response.output_text.delta",
                                      "response.output_text.delta", "response.output_text.done",
                                      "response.content_part.done", "response.output_item.done",
                                      "response.completed"}));
  expect_sequence_numbers(ev);
  EXPECT_EQ(ev[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].second["response"]["model"], "m");
  EXPECT_EQ(ev[4].second["delta"], "Hel");
  const std::string item_id = ev[2].second["item"]["id"];
  EXPECT_EQ(ev[4].second["item_id"], item_id);
  EXPECT_EQ(ev[6].second["text"], "Hello");
  EXPECT_EQ(ev[8].second["item"]["content"][0]["text"], "Hello");
  const ojson& done = ev[9].second["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][0]["id"], item_id);
  EXPECT_EQ(done["usage"]["input_tokens"], 4);
  EXPECT_EQ(done["usage"]["output_tokens"], 2);
  EXPECT_EQ(s.final_response(), done);
}

TEST(ResponsesStream, FunctionCallItems) {
  ResponsesStream s(info());
  std::string sse = s.on_chunk(chunk(parse(R"({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get","arguments":"{\"x\""}}]})")));
  sse += s.on_chunk(chunk(parse(R"({"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]})")));
  sse += s.on_chunk(chunk(ojson::object(), "tool_calls"));
  sse += s.finish();
  const auto ev = parse_events(sse);
  EXPECT_EQ(testing::names(ev),
            (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
                                      "response.function_call_arguments.done", "response.output_item.done",
                                      "response.completed"}));
  expect_sequence_numbers(ev);
  EXPECT_EQ(ev[2].second["item"]["type"], "function_call");
  EXPECT_EQ(ev[2].second["item"]["arguments"], "");
  EXPECT_EQ(ev[2].second["item"]["call_id"], "call_a");
  EXPECT_EQ(ev[5].second["arguments"], "{\"x\":1}");
  EXPECT_EQ(ev[7].second["response"]["output"][0]["arguments"], "{\"x\":1}");
}

TEST(ResponsesStream, LengthIsIncompleteAndFailIsFailed) {
  ResponsesStream s(info());
  std::string sse = s.on_chunk(chunk({{"content", "a"}}));
  sse += s.on_chunk(chunk(ojson::object(), "length"));
  sse += s.finish();
  const auto ev = parse_events(sse);
  EXPECT_EQ(ev.back().first, "response.incomplete");
  EXPECT_EQ(ev.back().second["response"]["incomplete_details"]["reason"], "max_output_tokens");

  ResponsesStream f(info());
  (void)f.on_chunk(chunk({{"content", "a"}}));
  ShapeError e;
  e.status = 500;
  e.message = "engine failed";
  const auto fe = parse_events(f.fail(e));
  ASSERT_EQ(fe.size(), 1u);
  EXPECT_EQ(fe[0].first, "response.failed");
  EXPECT_EQ(fe[0].second["response"]["status"], "failed");
  EXPECT_EQ(fe[0].second["response"]["error"]["message"], "engine failed");
  EXPECT_EQ(f.finish(), "");
}

}  // namespace
}  // namespace cadenza::apishape
