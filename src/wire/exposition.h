// The pieces of the Prometheus text exposition format 0.0.4 (what GET /metrics returns):
// numbers, label sets with escaping, HELP/TYPE headers, sample lines.
// https://prometheus.io/docs/instrumenting/exposition_formats/
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cadenza::wire {

// Label name/value pairs in the order they are written. Names must be valid Prometheus label
// names (the callers use fixed ones); values may hold any bytes (they are escaped).
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { counter, gauge, histogram };
std::string_view to_string(MetricType t);

// A sample value: "+Inf", "-Inf", "NaN"; integral values below 2^53 as integers ("3", not
// "3.0"); others in the shortest form that reads back exactly ("0.125", "1e+16").
std::string format_value(double v);

// A label value with `\`, `"` and line feed escaped as `\\`, `\"` and `\n`.
std::string escape_label_value(std::string_view v);

// `{a="x",b="y"}`, or "" for no labels.
std::string label_text(const Labels& labels);

// "# HELP name help\n# TYPE name type\n" appended to `out` (`\` and line feeds in `help`
// escaped).
void write_header(std::string& out, std::string_view name, MetricType type, std::string_view help);

// "name{labels} value\n" appended to `out`.
void write_sample(std::string& out, std::string_view name, const Labels& labels, double value);

}  // namespace cadenza::wire
