#include "wire/exposition.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace cadenza::wire {

std::string_view to_string(MetricType t) {
  switch (t) {
    case MetricType::counter: return "counter";
    case MetricType::gauge: return "gauge";
    case MetricType::histogram: return "histogram";
  }
  return "untyped";
}

std::string format_value(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // Counters are whole numbers: print them as integers, exactly, up to where doubles stop being
  // exact (2^53), which matches fmt's shortest form there except for "-0".
  constexpr double kExactIntegers = 9007199254740992.0;
  if (std::fabs(v) < kExactIntegers && v == std::trunc(v))
    return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first;
    out += "=\"";
    out += escape_label_value(labels[i].second);
    out += '"';
  }
  out += '}';
  return out;
}

void write_header(std::string& out, std::string_view name, MetricType type, std::string_view help) {
  std::string escaped;  // HELP text escapes backslashes and line feeds (quotes stay)
  escaped.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      escaped += "\\\\";
    else if (c == '\n')
      escaped += "\\n";
    else
      escaped += c;
  }
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escaped, name, to_string(type));
}

void write_sample(std::string& out, std::string_view name, const Labels& labels, double value) {
  out += name;
  out += label_text(labels);
  out += ' ';
  out += format_value(value);
  out += '\n';
}

}  // namespace cadenza::wire
