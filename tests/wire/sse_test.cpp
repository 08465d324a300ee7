// SSE and chunk framing (src/wire/sse.h). Events are read back with a parser written from the
// WHATWG event-stream rules, so a framing that loses or merges lines fails here.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "wire/sse.h"

namespace cadenza::wire {
namespace {

// The `data` of every event in `stream`, per https://html.spec.whatwg.org/#event-stream-interpretation
// (lines end at CRLF, LF or CR; `data:` fields append their value and a LF; a blank line
// dispatches the event without its last LF; one space after the colon is dropped).
std::vector<std::string> parse_events(const std::string& stream) {
  std::vector<std::string> events;
  std::string data;
  bool have_data = false;
  size_t pos = 0;
  while (pos < stream.size()) {
    size_t end = stream.find_first_of("\r\n", pos);
    if (end == std::string::npos) break;  // an unterminated line is not a complete event
    const std::string line = stream.substr(pos, end - pos);
    pos = end + (stream.compare(end, 2, "\r\n") == 0 ? 2 : 1);
    if (line.empty()) {
      if (have_data) {
        if (!data.empty() && data.back() == '\n') data.pop_back();
        events.push_back(data);
      }
      data.clear();
      have_data = false;
      continue;
    }
    const size_t colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (field == "data") {
      data += value + "\n";
      have_data = true;
    }
  }
  return events;
}

TEST(SseEvent, OneLineIsOneDataField) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("[DONE]"), "data: [DONE]\n\n");
  EXPECT_EQ(sse_event(""), "data: \n\n");
}

TEST(SseEvent, EveryLineOfMultiLineDataGetsItsOwnField) {
  EXPECT_EQ(sse_event("a\nb"), "data: a\ndata: b\n\n");
  EXPECT_EQ(sse_event("a\r\nb\rc"), "data: a\ndata: b\ndata: c\n\n");
  EXPECT_EQ(sse_event("a\n"), "data: a\ndata: \n\n");
  EXPECT_EQ(sse_event("\n\n"), "data: \ndata: \ndata: \n\n");
}

TEST(SseEvent, ClientsReadBackWhatWasSent) {
  const std::vector<std::string> sent = {
      "{\"x\":\"y\"}", "line one\nline two", "trailing\n", "\nleading", "", "a\n\nb",
      " leading space", "data: inside", "x\r\ny"};
  std::string stream;
  for (const auto& d : sent) stream += sse_event(d);
  const auto got = parse_events(stream);
  ASSERT_EQ(got.size(), sent.size()) << stream;
  for (size_t i = 0; i < sent.size(); ++i) {
    std::string want;  // what a client sees: CRLF became LF
    for (size_t c = 0; c < sent[i].size(); ++c)
      if (!(sent[i][c] == '\r' && c + 1 < sent[i].size() && sent[i][c + 1] == '\n'))
        want += sent[i][c];
    EXPECT_EQ(got[i], want) << "event " << i;
  }
}

TEST(HttpChunk, SizeInHexThenPayload) {
  EXPECT_EQ(http_chunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(http_chunk(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

}  // namespace
}  // namespace cadenza::wire
