#include "loadgen/sweep.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "loadgen/results.h"

namespace cadenza::loadgen {
namespace {

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.push_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

Result<double> parse_rate(std::string_view text) {
  if (text == "inf" || text == "infinity" || text == "Inf")
    return std::numeric_limits<double>::infinity();
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !(v > 0) || std::isinf(v))
    return make_error("'{}': a request rate is a positive number or inf", text);
  return v;
}

Result<std::vector<int32_t>> parse_concurrency_list(std::string_view text) {
  std::vector<int32_t> out;
  for (std::string_view item : split(text)) {
    int32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 1)
      return make_error("'{}': a concurrency is an integer >= 1", item);
    out.push_back(v);
  }
  return out;
}

Result<std::vector<double>> parse_rate_list(std::string_view text) {
  std::vector<double> out;
  for (std::string_view item : split(text)) {
    auto r = parse_rate(item);
    if (!r) return r.error_value();
    out.push_back(*r);
  }
  return out;
}

Result<std::vector<SweepPoint>> plan_points(std::string_view sweep_concurrency,
                                            std::string_view sweep_rate, double rate,
                                            int32_t concurrency) {
  if (!sweep_concurrency.empty() && !sweep_rate.empty())
    return Error("--sweep-concurrency and --sweep-rate are exclusive");
  std::vector<SweepPoint> points;
  if (!sweep_concurrency.empty()) {
    auto list = parse_concurrency_list(sweep_concurrency);
    if (!list) return list.error_value();
    for (int32_t c : *list) points.push_back({"c=" + std::to_string(c), c, 0.0});
  } else if (!sweep_rate.empty()) {
    auto list = parse_rate_list(sweep_rate);
    if (!list) return list.error_value();
    for (double r : *list) points.push_back({"rate=" + format_rate(r), concurrency, r});
  } else if (rate > 0) {
    points.push_back({"rate=" + format_rate(rate), concurrency, rate});
  } else {
    if (concurrency < 1) return Error("a closed-loop run needs --concurrency >= 1");
    points.push_back({"c=" + std::to_string(concurrency), concurrency, 0.0});
  }
  return points;
}

}  // namespace cadenza::loadgen
