// The gateway's metrics, rendered as Prometheus text 0.0.4 on GET /metrics. Every name starts
// with cadenza_gateway_ (docs/gateway.md lists them).
// Thread-safety: all methods are safe from any thread (one mutex; updates are a map lookup).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cadenza::gateway {

using Labels = std::vector<std::pair<std::string, std::string>>;

class GatewayMetrics {
 public:
  GatewayMetrics();
  void inc(const std::string& name, const Labels& labels, double v = 1);
  void set(const std::string& name, const Labels& labels, double v);
  // Histogram observation (seconds).
  void observe(const std::string& name, const Labels& labels, double seconds);
  // A counter's current value (0 when never incremented); for tests and /metrics consumers.
  double value(const std::string& name, const Labels& labels) const;
  std::string render() const;

 private:
  struct Family {
    std::string type;  // counter, gauge, histogram
    std::string help;
  };
  struct Histogram {
    std::vector<double> counts;  // per bucket (cumulative at render time)
    double sum = 0;
    double count = 0;
  };
  static std::string label_text(const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, std::map<std::string, double>> values_;
  std::map<std::string, std::map<std::string, Histogram>> hists_;
  std::vector<double> bounds_;
};

}  // namespace cadenza::gateway
