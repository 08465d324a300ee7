#include "loadgen/runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "loadgen/arrival.h"
#include "loadgen/sse_parser.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::loadgen {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

double RequestRecord::tpot_s() const {
  if (!ok() || output_tokens < 2 || ttft_s < 0) return -1;
  return (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1);
}

void to_json(nlohmann::json& j, const RequestRecord& r) {
  auto ms = [](double s) { return s < 0 ? -1.0 : s * 1e3; };
  std::vector<double> chunks;
  chunks.reserve(r.chunk_s.size());
  for (double c : r.chunk_s) chunks.push_back(c * 1e3);
  j = nlohmann::json{{"index", r.index},
                     {"start_ms", ms(r.start_s)},
                     {"ttft_ms", ms(r.ttft_s)},
                     {"e2e_ms", ms(r.e2e_s)},
                     {"tpot_ms", ms(r.tpot_s())},
                     {"chunk_ms", chunks},
                     {"prompt_tokens", r.prompt_tokens},
                     {"output_tokens", r.output_tokens},
                     {"output_source", r.output_source},
                     {"max_tokens", r.max_tokens},
                     {"error", to_string(r.error)}};
  if (r.usage_output_tokens >= 0) j["usage_output_tokens"] = r.usage_output_tokens;
  if (r.http_status) j["http_status"] = r.http_status;
  if (!r.message.empty()) j["message"] = r.message;
}

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

// Shared state of one run; lives on the stack of run_load while the io_context runs.
struct Run {
  asio::io_context& io;
  HttpClient& client;
  const RunConfig& cfg;
  const std::vector<WorkItem>& items;
  const Tokenizer* tokenizer;
  Clock::time_point t0{};
  std::deque<RequestRecord>* records = nullptr;  // null: warmup (nothing kept)
  size_t next = 0;                               // next request to send
  size_t limit = 0;                              // requests to send; SIZE_MAX with a duration
  Clock::time_point stop_at = Clock::time_point::max();
  size_t in_flight = 0;
  asio::steady_timer slot_free;  // cancelled when a request finishes (open loop with a cap)
  Clock::time_point last_end{};

  Run(asio::io_context& io_, HttpClient& c, const RunConfig& cfg_, const std::vector<WorkItem>& it,
      const Tokenizer* tok)
      : io(io_), client(c), cfg(cfg_), items(it), tokenizer(tok), slot_free(io_) {}

  bool more() const { return next < limit && Clock::now() < stop_at; }

  // Contract: the caller counted this request in in_flight before starting it.
  asio::awaitable<void> one(size_t index) {
    const WorkItem& item = items[index % items.size()];
    RequestRecord local;
    RequestRecord& r = records ? records->emplace_back() : local;
    r.index = index;
    r.max_tokens = item.max_tokens;
    const auto start = Clock::now();
    r.start_s = seconds(start - t0);
    SseParser sse;
    std::string text;
    bool done = false;
    std::optional<int32_t> usage_prompt, usage_completion;
    std::optional<double> empty_finish_s;  // a finish chunk without text (ChunkInfo::empty_finish)
    ErrorKind stream_error = ErrorKind::none;
    std::string stream_message;
    auto on_event = [&](const SseEvent& ev) {
      if (stream_error != ErrorKind::none || done) return;
      auto c = parse_chunk(ev.data, cfg.request.api);
      if (!c) {
        stream_error = c.error().rfind("server error", 0) == 0 ? ErrorKind::server_error
                                                               : ErrorKind::malformed;
        stream_message = c.error();
        return;
      }
      if (c->done) {
        done = true;
        return;
      }
      if (c->token) r.chunk_s.push_back(seconds(Clock::now() - start));
      if (c->empty_finish) empty_finish_s = seconds(Clock::now() - start);
      if (tokenizer) text += c->content;
      if (c->prompt_tokens) usage_prompt = c->prompt_tokens;
      if (c->completion_tokens) usage_completion = c->completion_tokens;
    };
    auto on_data = [&](std::string_view bytes) {
      if (!sse.feed(bytes, on_event)) {
        stream_error = ErrorKind::malformed;
        stream_message = "SSE line too long";
      }
      return stream_error == ErrorKind::none;
    };
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(cfg.timeout_s));
    HttpOutcome out =
        co_await client.post(build_request_body(item, cfg.request), deadline, on_data);
    const auto end = Clock::now();
    r.e2e_s = seconds(end - start);
    r.http_status = out.status;
    if (out.error != ErrorKind::none) {
      r.error = out.error;
      r.message = out.message;
    } else if (stream_error != ErrorKind::none) {
      r.error = stream_error;
      r.message = stream_message;
    } else if (!done) {
      r.error = ErrorKind::malformed;
      r.message = "the stream ended without data: [DONE]";
    }
    // The finish_reason rode on the last token's (empty) chunk: the server's count says so.
    if (empty_finish_s && usage_completion &&
        static_cast<size_t>(*usage_completion) > r.chunk_s.size() &&
        (r.chunk_s.empty() || *empty_finish_s >= r.chunk_s.back()))
      r.chunk_s.push_back(*empty_finish_s);
    if (!r.chunk_s.empty()) r.ttft_s = r.chunk_s.front();
    r.prompt_tokens = usage_prompt.value_or(item.prompt_tokens);
    r.usage_output_tokens = usage_completion.value_or(-1);
    // The server's count is exact; re-encoding the text is not (text that was generated as one
    // token sequence can encode as another, and special tokens have no text).
    if (usage_completion) {
      r.output_tokens = *usage_completion;
      r.output_source = "usage";
    } else if (tokenizer) {
      r.output_tokens = static_cast<int32_t>(tokenizer->encode(text, false, false).size());
      r.output_source = "tokenizer";
    } else {
      r.output_tokens = static_cast<int32_t>(r.chunk_s.size());
      r.output_source = "chunks";
    }
    last_end = std::max(last_end, end);
    --in_flight;
    slot_free.cancel();
  }

  asio::awaitable<void> worker() {
    while (more()) {
      ++in_flight;
      co_await one(next++);
    }
  }

  asio::awaitable<void> dispatcher(double rate) {
    ArrivalProcess arrivals(rate, cfg.seed);
    asio::steady_timer timer(io);
    double t = 0;
    while (next < limit) {
      t += arrivals.next_gap();
      const auto at =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
      if (at >= stop_at) break;
      if (at > Clock::now()) {
        timer.expires_at(at);
        boost::system::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      while (cfg.concurrency > 0 && in_flight >= static_cast<size_t>(cfg.concurrency)) {
        slot_free.expires_at(Clock::time_point::max());
        boost::system::error_code ec;
        co_await slot_free.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      ++in_flight;  // now, not when the coroutine starts: the cap check above counts it
      asio::co_spawn(io, one(next++), asio::detached);
    }
  }
};

// GETs cfg.metrics_target (at most 10 s, or the request timeout when shorter) into `out`.
void scrape(asio::io_context& io, HttpClient& client, const RunConfig& cfg, MetricsScrape& out) {
  const double limit_s = std::min(cfg.timeout_s, 10.0);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limit_s));
  auto task = [&]() -> asio::awaitable<void> {
    auto [outcome, body] = co_await client.get(cfg.metrics_target, deadline);
    out.ok = outcome.error == ErrorKind::none;
    if (out.ok)
      out.body = std::move(body);
    else
      out.error = outcome.message;
  };
  asio::co_spawn(io, task(), asio::detached);
  io.run();
  io.restart();
}

}  // namespace

Result<RunResult> run_load(const RunConfig& cfg, const std::vector<WorkItem>& items,
                           const std::vector<WorkItem>& warmup_items, const Tokenizer* tokenizer) {
  auto ep = parse_url(cfg.url, cfg.request.api);
  if (!ep) return ep.error_value();
  if (items.empty()) return Error("bench serve: the workload is empty");
  if (cfg.num_requests == 0 && cfg.duration_s <= 0)
    return Error("bench serve: give a number of requests or a duration");
  if (cfg.request_rate == 0 && cfg.concurrency < 1)
    return Error("bench serve: a closed-loop run needs a concurrency of at least 1");
  if (cfg.request_rate < 0 || std::isnan(cfg.request_rate))
    return Error("bench serve: the request rate must be positive or inf");

  asio::io_context io(1);
  HttpClient client(io, *ep, cfg.api_key);

  if (cfg.warmup > 0 && !warmup_items.empty()) {
    Run warm(io, client, cfg, warmup_items, nullptr);
    warm.limit = static_cast<size_t>(cfg.warmup);
    warm.t0 = Clock::now();
    const int32_t workers = std::min(std::max(cfg.concurrency, 1), cfg.warmup);
    for (int32_t w = 0; w < workers; ++w) asio::co_spawn(io, warm.worker(), asio::detached);
    io.run();
    io.restart();
  }

  RunResult result;
  if (!cfg.metrics_target.empty()) scrape(io, client, cfg, result.metrics_before);
  Run run(io, client, cfg, items, tokenizer);
  run.records = &result.records;
  run.limit = cfg.num_requests > 0 ? cfg.num_requests : std::numeric_limits<size_t>::max();
  const double cpu0 = cpu_seconds();
  run.t0 = Clock::now();
  run.last_end = run.t0;
  if (cfg.duration_s > 0)
    run.stop_at = run.t0 + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(cfg.duration_s));
  if (cfg.request_rate == 0) {
    for (int32_t w = 0; w < cfg.concurrency; ++w) asio::co_spawn(io, run.worker(), asio::detached);
  } else {
    asio::co_spawn(io, run.dispatcher(cfg.request_rate), asio::detached);
  }
  io.run();
  result.cpu_s = cpu_seconds() - cpu0;
  result.duration_s = seconds(run.last_end - run.t0);
  result.connections_opened = client.connections_opened();
  if (!cfg.metrics_target.empty()) {
    io.restart();
    scrape(io, client, cfg, result.metrics_after);
  }
  return result;
}

}  // namespace cadenza::loadgen
