// Load checks for `cadenza serve` (docs/server.md, "Capacity and overhead"), against a server
// already running on 127.0.0.1:PORT.
//
//   server_load connections --port P --pid PID [--connections 1000] [--max-tokens 4000] [--hold 10]
//     Opens N concurrent streaming completions that stay open (most wait in the server's queue,
//     the others stream slowly), then samples the server's thread count (/proc/PID/task) and RSS
//     (/proc/PID/status) every second and probes GET /health all along; closes everything and
//     samples again. Prints baseline / loaded / after numbers and /health latency percentiles.
//
//   server_load overhead --port P --pid PID [--requests 20] [--max-tokens 256] [--prompt TEXT]
//                        [--cadenza BIN --model M [--generate-args '-t 1 --max-model-len 2048']]
//     Sends the requests one at a time (c=1, streaming, greedy, ignore_eos) and measures the
//     server's CPU time per generated token (all threads, /proc/PID/task/*/schedstat: the busiest
//     thread is the engine's, the rest is HTTP). With --cadenza, runs `cadenza generate
//     --sequential` on the same requests and reports its CPU time per token, and the difference:
//     the server's overhead per token. CPU time, not wall time, so that a shared, loaded machine
//     still gives usable numbers (the wall times are printed too).
//
// One I/O thread drives all streaming connections (Boost.Asio); /health probes run on another.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode;
  int port = 0;
  int pid = 0;
  int connections = 1000;
  int max_tokens = 4000;
  double hold_s = 10;
  int requests = 20;
  std::string prompt = "Once upon a time";
  std::string cadenza;  // overhead: the cadenza binary, to run `generate` for comparison
  std::string model;    // overhead: the model the server serves
  std::string
      generate_args;  // overhead: more generate options (match the server's), space-separated
};

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

struct ProcSample {
  int threads = 0;
  long rss_kib = 0;
};

ProcSample sample(int pid) {
  ProcSample s;
  const std::string task = fmt::format("/proc/{}/task", pid);
  if (DIR* d = ::opendir(task.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++s.threads;
    ::closedir(d);
  }
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stol(line.substr(6));
  return s;
}

std::string completion_request(const std::string& prompt, int max_tokens, bool close) {
  const std::string body =
      nlohmann::json{{"prompt", prompt}, {"max_tokens", max_tokens},
                     {"temperature", 0}, {"ignore_eos", true},
                     {"stream", true},   {"stream_options", {{"include_usage", true}}}}
          .dump();
  return fmt::format(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\nConnection: {}\r\n\r\n{}",
      body.size(), close ? "close" : "keep-alive", body);
}

// One blocking exchange that ends with the server closing the connection; the milliseconds it
// took, or -1 on an error. `out` gets the bytes when not null.
double blocking_exchange(int port, const std::string& request, std::string* out) {
  const auto t0 = Clock::now();
  net::io_context ioc;
  tcp::socket s(ioc);
  boost::system::error_code ec;
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)), ec);
  if (ec) return -1;
  net::write(s, net::buffer(request), ec);
  if (ec) return -1;
  std::string data;
  char buf[16384];
  while (true) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    data.append(buf, n);
    if (ec) break;
  }
  if (ec != net::error::eof) return -1;
  if (out) *out = std::move(data);
  return ms_since(t0);
}

double health(int port) {
  std::string r;
  const double ms = blocking_exchange(
      port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", &r);
  return r.rfind("HTTP/1.1 200", 0) == 0 ? ms : -1;
}

// A streaming connection that stays open.
struct Stream : std::enable_shared_from_this<Stream> {
  explicit Stream(net::io_context& ioc) : socket(ioc) {}
  tcp::socket socket;
  std::string request;
  char buf[4096];
  std::string head;  // the first bytes (status line)
  size_t bytes = 0;
  std::atomic<bool> sent{false}, answered{false}, ended{false}, failed{false};

  void start(const tcp::endpoint& ep) {
    socket.async_connect(ep, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) {
        self->failed = true;
        return;
      }
      net::async_write(self->socket, net::buffer(self->request),
                       [self](boost::system::error_code wec, size_t) {
                         if (wec) {
                           self->failed = true;
                           return;
                         }
                         self->sent = true;
                         self->read();
                       });
    });
  }
  void read() {
    socket.async_read_some(net::buffer(buf),
                           [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                             if (ec) {
                               self->ended = true;
                               return;
                             }
                             if (self->head.size() < 64)
                               self->head.append(self->buf, std::min<size_t>(n, 64));
                             if (self->head.rfind("HTTP/1.1 200", 0) == 0) self->answered = true;
                             self->bytes += n;
                             self->read();
                           });
  }
};

int run_connections(const Args& a) {
  if (a.pid <= 0) {
    std::fprintf(stderr, "connections: --pid of the server is required\n");
    return 2;
  }
  const ProcSample base = sample(a.pid);
  if (base.threads == 0) {
    std::fprintf(stderr, "connections: no process %d\n", a.pid);
    return 1;
  }
  std::vector<double> base_health;
  for (int i = 0; i < 20; ++i) base_health.push_back(health(a.port));
  if (percentile(base_health, 0) < 0) {
    std::fprintf(stderr, "connections: GET /health fails on port %d\n", a.port);
    return 1;
  }
  fmt::print("baseline: threads {}, RSS {:.1f} MiB, /health p50 {:.2f} ms p99 {:.2f} ms\n",
             base.threads, base.rss_kib / 1024.0, percentile(base_health, 50),
             percentile(base_health, 99));

  net::io_context ioc;
  auto guard = net::make_work_guard(ioc);
  std::thread io([&] { ioc.run(); });
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(a.port));
  std::vector<std::shared_ptr<Stream>> streams;
  const std::string req = completion_request(a.prompt, a.max_tokens, false);
  const auto t_open = Clock::now();
  for (int i = 0; i < a.connections; ++i) {
    auto s = std::make_shared<Stream>(ioc);
    s->request = req;
    streams.push_back(s);
    net::post(ioc, [s, ep] { s->start(ep); });
  }
  auto count = [&](auto pred) {
    return static_cast<int>(std::count_if(streams.begin(), streams.end(), pred));
  };
  while (ms_since(t_open) < 30'000 &&
         count([](const auto& s) { return s->sent.load() || s->failed.load(); }) < a.connections)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double open_ms = ms_since(t_open);

  ProcSample peak;
  std::vector<double> lat;
  int health_failures = 0;
  const auto t_hold = Clock::now();
  auto next_sample = Clock::now();
  while (ms_since(t_hold) < a.hold_s * 1000) {
    if (Clock::now() >= next_sample) {
      const ProcSample s = sample(a.pid);
      peak.threads = std::max(peak.threads, s.threads);
      peak.rss_kib = std::max(peak.rss_kib, s.rss_kib);
      next_sample += std::chrono::seconds(1);
    }
    const double ms = health(a.port);
    if (ms < 0)
      ++health_failures;
    else
      lat.push_back(ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int sent = count([](const auto& s) { return s->sent.load(); });
  const int failed = count([](const auto& s) { return s->failed.load(); });
  const int answered = count([](const auto& s) { return s->answered.load(); });
  const int ended = count([](const auto& s) { return s->ended.load(); });
  fmt::print(
      "loaded:   {} connections open in {:.0f} ms ({} failed to open); after {:.0f} s: {} "
      "streaming (200 + tokens), {} waiting for their first byte, {} ended\n",
      sent, open_ms, failed, a.hold_s, answered, sent - answered - ended, ended);
  fmt::print(
      "loaded:   threads max {}, RSS max {:.1f} MiB (+{:.1f} MiB, {:.1f} KiB per "
      "connection), /health p50 {:.2f} ms p99 {:.2f} ms max {:.2f} ms over {} probes, {} "
      "failed\n",
      peak.threads, peak.rss_kib / 1024.0, (peak.rss_kib - base.rss_kib) / 1024.0,
      sent > 0 ? static_cast<double>(peak.rss_kib - base.rss_kib) / sent : 0.0, percentile(lat, 50),
      percentile(lat, 99), percentile(lat, 100), lat.size(), health_failures);

  net::post(ioc, [&] {
    for (auto& s : streams) {
      boost::system::error_code ec;
      s->socket.close(ec);
    }
  });
  guard.reset();
  io.join();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const ProcSample after = sample(a.pid);
  std::vector<double> after_health;
  for (int i = 0; i < 20; ++i) after_health.push_back(health(a.port));
  fmt::print("after:    threads {}, RSS {:.1f} MiB, /health p50 {:.2f} ms\n", after.threads,
             after.rss_kib / 1024.0, percentile(after_health, 50));
  return failed == 0 && health_failures == 0 ? 0 : 1;
}

// CPU nanoseconds per thread of process `pid` (/proc/PID/task/TID/schedstat, first field).
std::map<int, int64_t> thread_cpu_ns(int pid) {
  std::map<int, int64_t> out;
  const std::string task = fmt::format("/proc/{}/task", pid);
  if (DIR* d = ::opendir(task.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(fmt::format("{}/{}/schedstat", task, e->d_name));
      int64_t ns = 0;
      if (in >> ns) out[std::atoi(e->d_name)] = ns;
    }
    ::closedir(d);
  }
  return out;
}

// Runs `argv` to completion; its user + system CPU seconds (-1 when it fails).
double run_for_cpu(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& x : argv) args.push_back(const_cast<char*>(x.c_str()));
  args.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDOUT_FILENO);
    ::dup2(devnull, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  if (::wait4(child, &status, 0, &ru) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

int run_overhead(const Args& a) {
  if (a.pid <= 0) {
    std::fprintf(stderr, "overhead: --pid of the server is required\n");
    return 2;
  }
  const std::string req = completion_request(a.prompt, a.max_tokens, true);
  std::string warm;
  blocking_exchange(a.port, req, &warm);  // one warm-up request
  const auto cpu0 = thread_cpu_ns(a.pid);
  std::vector<double> e2e;
  for (int i = 0; i < a.requests; ++i) {
    std::string body;
    const double ms = blocking_exchange(a.port, req, &body);
    // The usage chunk (stream_options.include_usage) says how many tokens were generated.
    const size_t u = body.find("\"completion_tokens\":");
    const long generated = u == std::string::npos ? -1 : std::atol(body.c_str() + u + 20);
    if (ms < 0 || body.rfind("HTTP/1.1 200", 0) != 0 ||
        body.find("data: [DONE]") == std::string::npos || generated != a.max_tokens) {
      std::fprintf(stderr, "overhead: request %d failed (%ld tokens, not %d)\n", i, generated,
                   a.max_tokens);
      return 1;
    }
    e2e.push_back(ms);
  }
  const auto cpu1 = thread_cpu_ns(a.pid);
  // Per thread: the busiest one is the engine thread (forward passes); the others are the HTTP
  // I/O threads (and idle ones: main, signal, drain).
  std::vector<int64_t> deltas;
  for (const auto& [tid, ns] : cpu1) deltas.push_back(ns - (cpu0.count(tid) ? cpu0.at(tid) : 0));
  std::sort(deltas.rbegin(), deltas.rend());
  const double tokens = static_cast<double>(a.requests) * a.max_tokens;
  int64_t total = 0;
  for (int64_t d : deltas) total += d;
  const double serve_us = total / 1e3 / tokens;
  const double engine_thread_us = deltas.empty() ? 0 : deltas[0] / 1e3 / tokens;
  const double serve_ms = percentile(e2e, 50);
  fmt::print(
      "serve:    {} requests x {} tokens, c=1, streamed: wall median {:.2f} ms per request "
      "({:.1f} tokens/s)\n",
      a.requests, a.max_tokens, serve_ms, a.max_tokens / serve_ms * 1000);
  fmt::print(
      "serve:    server CPU {:.1f} us/token: engine thread {:.1f}, other threads (HTTP I/O) "
      "{:.1f}\n",
      serve_us, engine_thread_us, serve_us - engine_thread_us);
  if (a.cadenza.empty()) return 0;

  // The engine alone: `cadenza generate --sequential` over the same requests, CPU time of
  // requests+1 minus 1 request (model loading and start-up cancel out).
  char dir_template[] = "/tmp/server-load-XXXXXX";
  if (!::mkdtemp(dir_template)) return 1;
  const std::string dir = dir_template;
  auto write_input = [&](const std::string& path, int n) {
    std::ofstream out(path);
    for (int i = 0; i < n; ++i)
      out << nlohmann::json{{"prompt", a.prompt},
                            {"max_tokens", a.max_tokens},
                            {"temperature", 0},
                            {"ignore_eos", true}}
                 .dump()
          << "\n";
  };
  write_input(dir + "/one.jsonl", 1);
  write_input(dir + "/many.jsonl", a.requests + 1);
  auto generate = [&](const std::string& input) {
    std::vector<std::string> argv = {a.cadenza,  "generate",         "-m",
                                     a.model,    "--input",          input,
                                     "--output", dir + "/out.jsonl", "--sequential"};
    std::istringstream extra(a.generate_args);
    for (std::string w; extra >> w;) argv.push_back(w);
    return run_for_cpu(argv);
  };
  std::vector<double> per_token;
  for (int rep = 0; rep < 3; ++rep) {
    const double one = generate(dir + "/one.jsonl");
    const double many = generate(dir + "/many.jsonl");
    if (one < 0 || many < 0) {
      std::fprintf(stderr, "overhead: cadenza generate failed\n");
      return 1;
    }
    per_token.push_back((many - one) * 1e6 / tokens);
  }
  std::filesystem::remove_all(dir);
  const double engine_us = percentile(per_token, 50);
  fmt::print(
      "engine:   cadenza generate --sequential, same requests: CPU {:.1f} us/token (median "
      "of 3)\n",
      engine_us);
  fmt::print("overhead: {:.1f} us of server CPU per token ({:+.1f}% over the engine alone)\n",
             serve_us - engine_us, (serve_us / engine_us - 1) * 100);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: server_load connections --port P --pid PID [--connections N] "
               "[--max-tokens N] [--hold S] [--prompt T]\n"
               "       server_load overhead --port P --pid PID [--requests N] [--max-tokens N] "
               "[--prompt T] [--cadenza BIN --model M [--generate-args 'ARGS']]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) return usage();
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    try {
      if (k == "--port")
        a.port = std::stoi(v);
      else if (k == "--pid")
        a.pid = std::stoi(v);
      else if (k == "--connections")
        a.connections = std::stoi(v);
      else if (k == "--max-tokens")
        a.max_tokens = std::stoi(v);
      else if (k == "--hold")
        a.hold_s = std::stod(v);
      else if (k == "--requests")
        a.requests = std::stoi(v);
      else if (k == "--prompt")
        a.prompt = v;
      else if (k == "--cadenza")
        a.cadenza = v;
      else if (k == "--model")
        a.model = v;
      else if (k == "--generate-args")
        a.generate_args = v;
      else
        return usage();
    } catch (const std::exception&) {
      return usage();
    }
  }
  if (a.port <= 0 || a.connections < 1 || a.max_tokens < 1 || a.requests < 1) return usage();
  if (a.mode == "connections") return run_connections(a);
  if (a.mode == "overhead") return run_overhead(a);
  return usage();
}
