// A registry of Prometheus metric families (counters, gauges, histograms), each with any number
// of labelled series, rendered as the text exposition format 0.0.4. `cadenza serve`
// (server/metrics.h) and `cadenza gateway` (gateway/metrics.h) each declare their families in one
// and render it on GET /metrics.
//
// Order: families in the order they were declared; series within a family by their label values,
// label by label: integer values first and by value ("2" before "10"), other text after them
// byte by byte.
// Contract: a family is declared once, before its first update; updates of an undeclared name
// are a bug (asserted; ignored without asserts). Labels of one family come in the same order on
// every call (they are the series' key).
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "wire/exposition.h"
#include "wire/histogram.h"

namespace cadenza::wire {

// What a family without any series renders.
enum class WhenEmpty {
  header_only,  // its HELP and TYPE lines only
  zero,         // one series without labels at 0 (a histogram: zero buckets, sum and count)
  omit,         // nothing at all
};

class Registry {
 public:
  // `bounds`: the bucket upper bounds of a histogram family (ignored for the others).
  void declare(std::string name, MetricType type, std::string help,
               WhenEmpty when_empty = WhenEmpty::header_only, std::vector<double> bounds = {});

  // Counters and gauges: adds `v` to the series (created at 0).
  void inc(std::string_view name, const Labels& labels, double v = 1);
  // Gauges (and counters mirrored from elsewhere): sets the series to `v`.
  void set(std::string_view name, const Labels& labels, double v);
  // Histograms: one observation.
  void observe(std::string_view name, const Labels& labels, double v);
  // Drops every series of the family (for families rebuilt from a snapshot before rendering).
  void clear(std::string_view name);

  // A counter's or gauge's value, a histogram's count; 0 for an unknown name or series.
  double value(std::string_view name, const Labels& labels) const;

  // The whole exposition text.
  std::string render() const;
  void render(std::string& out) const;

 private:
  struct LabelOrder {
    bool operator()(const Labels& a, const Labels& b) const;
  };
  struct Family {
    std::string name;
    MetricType type;
    std::string help;
    WhenEmpty when_empty;
    std::shared_ptr<const std::vector<double>> bounds;  // histograms only
    std::map<Labels, double, LabelOrder> values;         // counters and gauges
    std::map<Labels, Histogram, LabelOrder> histograms;  // histograms
  };
  Family* find(std::string_view name);
  const Family* find(std::string_view name) const;

  mutable std::mutex mu_;
  std::vector<Family> families_;              // declaration order
  std::map<std::string, size_t, std::less<>> index_;  // name -> families_ index
};

}  // namespace cadenza::wire
