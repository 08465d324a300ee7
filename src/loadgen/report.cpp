#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "loadgen/stats.h"

namespace cadenza::loadgen {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string num(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e4 && a < 1e12) return fmt::format("{:.0f}", v);
  if (a >= 1e12 || a < 1e-3) return fmt::format("{:.3g}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000);
}

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> xy;
  bool markers = false;
  bool dashed = false;
};

struct Chart {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool y_is_fraction = false;
};

// Empirical CDF of `samples` as (value, fraction <= value) steps, at most ~400 points.
std::vector<std::pair<double, double>> cdf_points(std::vector<double> samples) {
  std::vector<std::pair<double, double>> out;
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  if (n <= 400) {
    for (size_t i = 0; i < n; ++i) {
      out.emplace_back(samples[i], static_cast<double>(i) / static_cast<double>(n));
      out.emplace_back(samples[i], static_cast<double>(i + 1) / static_cast<double>(n));
    }
  } else {
    for (int k = 0; k <= 400; ++k) {
      const double p = k / 4.0;
      out.emplace_back(percentile_sorted(samples, p), p / 100.0);
    }
  }
  return out;
}

std::string render_chart(const Chart& c) {
  constexpr double W = 560, H = 340, L = 64, R = 16, T = 34, B = 48;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : c.series)
    for (auto [x, y] : s.xy) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  size_t shown = 0;
  for (const auto& s : c.series) shown += s.xy.empty() ? 0 : 1;
  const double height = H + (shown ? 14.0 * static_cast<double>(shown) + 6 : 0.0);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
      "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" class=\"t\">{}</text>",
      W, height, W, height, W / 2, escape(c.title));
  if (x0 > x1) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data</text></svg>", W / 2,
                       H / 2);
    return svg;
  }
  x0 = std::min(x0, 0.0);
  if (c.y_is_fraction) {
    y0 = 0;
    y1 = 1;
  } else {
    y0 = std::min(y0, 0.0);
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const auto xt = nice_ticks(x0, x1, 6), yt = nice_ticks(y0, y1, 5);
  x1 = std::max(x1, xt.back());
  y1 = std::max(y1, yt.back());
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  for (double t : xt) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" class=\"g\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>",
        px(t), T, H - B, H - B + 16, num(t));
  }
  for (double t : yt) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" class=\"g\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>",
        L, py(t), W - R, L - 6, py(t) + 4, num(t));
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"a\"/>"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" class=\"a\"/>"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>"
      "<text transform=\"translate(14 {7}) rotate(-90)\" text-anchor=\"middle\">{8}</text>",
      L, H - B, W - R, T, (L + W - R) / 2, H - 10, escape(c.xlabel), (T + H - B) / 2,
      escape(c.ylabel));
  // Legend below the plot, one row per curve, so it never hides data.
  std::string legend;
  double legend_y = H + 8;
  for (const auto& s : c.series) {
    if (s.xy.empty()) continue;
    std::string pts;
    for (auto [x, y] : s.xy) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"1.8\"{}><title>{}</title>"
        "</polyline>",
        pts, s.color, s.dashed ? " stroke-dasharray=\"5 3\"" : "", escape(s.name));
    if (s.markers)
      for (auto [x, y] : s.xy)
        svg += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}: ({}, {})</title>"
            "</circle>",
            px(x), py(y), s.color, escape(s.name), num(x), num(y));
    legend += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"3\"/>"
        "<text x=\"{}\" y=\"{:.1f}\">{}</text>",
        L, legend_y, L + 18, legend_y, s.color, L + 24, legend_y + 4,
        escape(s.name.size() > 64 ? s.name.substr(0, 63) + "…" : s.name));
    legend_y += 14;
  }
  svg += legend + "</svg>";
  return svg;
}

std::string summary_table(const std::vector<ResultFile>& files) {
  std::string h =
      "<table><tr><th>result</th><th>point</th><th>ok</th><th>failed</th><th>req/s</th>"
      "<th>goodput</th><th>out tok/s</th><th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th>"
      "<th>TPOT p99</th><th>ITL p50</th><th>E2E p50</th><th>errors</th><th>cpu ms/req</th>"
      "<th title=\"server /metrics over the point (server-wide): accepted / draft tokens, "
      "1 + accepted / verifications\">spec accept, tok/verif</th></tr>";
  for (const auto& f : files)
    for (const auto& p : f.points) {
      const Summary& s = p.summary;
      std::string errors;
      for (const auto& [k, n] : s.errors) errors += fmt::format("{} {} ", k, n);
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{}</td>"
          "<td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.2f}</td><td>{:.2f}</td>"
          "<td>{:.2f}</td><td>{:.1f}</td><td>{}</td><td>{:.3f}</td><td>{}</td></tr>",
          escape(f.name), escape(p.label), s.completed, s.failed, s.request_throughput,
          s.has_slo ? fmt::format("{:.2f}", s.goodput) : "-", s.output_token_throughput,
          s.ttft_ms.median, s.ttft_ms.p99, s.tpot_ms.median, s.tpot_ms.p99, s.itl_ms.median,
          s.e2e_ms.median, escape(errors.empty() ? "-" : errors), s.cpu_ms_per_request,
          p.spec_decode ? fmt::format("{:.1f}%, {:.2f}", 100 * p.spec_decode->acceptance_rate,
                                      p.spec_decode->mean_tokens_per_verification)
                        : "-");
    }
  return h + "</table>";
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  const double first = std::floor(lo / step);
  for (int i = 0; i <= 50; ++i) {
    const double v = (first + i) * step;
    if (v > hi + step * 0.999) break;
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::string render_report(const std::vector<ResultFile>& files, const std::string& title) {
  size_t n_points = 0;
  bool sweep = false;
  for (const auto& f : files) {
    n_points += f.points.size();
    sweep = sweep || f.points.size() > 1;
  }
  Chart ttft{"TTFT CDF", "time to first token (ms)", "fraction of requests", {}, true};
  Chart tpot{"TPOT CDF", "time per output token (ms)", "fraction of requests", {}, true};
  Chart itl{"ITL CDF", "inter-token latency (ms)", "fraction of gaps", {}, true};
  Chart tput_ttft{"Throughput vs TTFT", "output throughput (tok/s)", "median TTFT (ms)", {}, false};
  Chart tput_tpot{"Throughput vs TPOT", "output throughput (tok/s)", "median TPOT (ms)", {}, false};
  size_t color = 0;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const ResultFile& f = files[fi];
    Series a{f.name, kPalette[fi % kPaletteSize], {}, true, fi >= kPaletteSize};
    Series b = a;
    for (const PointResult& p : f.points) {
      const std::string name = files.size() > 1 ? f.name + " " + p.label : p.label;
      const std::string col = kPalette[(files.size() > 1 && !sweep ? fi : color) % kPaletteSize];
      ++color;
      ttft.series.push_back({name, col, cdf_points(p.ttft_ms)});
      tpot.series.push_back({name, col, cdf_points(p.tpot_ms)});
      itl.series.push_back({name, col, cdf_points(p.itl_ms)});
      a.xy.emplace_back(p.summary.output_token_throughput, p.summary.ttft_ms.median);
      b.xy.emplace_back(p.summary.output_token_throughput, p.summary.tpot_ms.median);
    }
    tput_ttft.series.push_back(std::move(a));
    tput_tpot.series.push_back(std::move(b));
  }
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>" +
      escape(title) +
      "</title><style>"
      "body{font:14px sans-serif;margin:24px;color:#222}"
      "h1{font-size:20px}svg{margin:6px;border:1px solid #ddd;vertical-align:top}"
      "svg text{font:11px sans-serif;fill:#333}svg text.t{font:bold 13px sans-serif}"
      "svg .g{stroke:#eee}svg .a{stroke:#555}"
      "table{border-collapse:collapse;margin-top:12px}"
      "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
      "td:first-child,td:nth-child(2){text-align:left}"
      "</style></head><body>\n<h1>" +
      escape(title) + "</h1>\n";
  h += fmt::format(
      "<p>{} result file(s), {} run point(s). Latencies are measured on the client "
      "from streamed chunks; see docs/bench-serve.md.</p>\n",
      files.size(), n_points);
  h += "<div class=\"charts\">" + render_chart(ttft) + render_chart(tpot) + render_chart(itl);
  if (sweep || files.size() > 1) h += render_chart(tput_ttft) + render_chart(tput_tpot);
  h += "</div>\n" + summary_table(files) + "\n";
  for (const auto& f : files)
    if (!f.config.empty())
      h += "<details><summary>configuration: " + escape(f.name) + "</summary><pre>" +
           escape(f.config.dump(2)) + "</pre></details>\n";
  h += "</body></html>\n";
  return h;
}

Status write_report(const std::vector<ResultFile>& files, const std::string& title,
                    const std::string& path) {
  std::ofstream out(path);
  if (!out) return make_error("{}: cannot write the report", path);
  out << render_report(files, title);
  if (!out) return make_error("{}: write failed", path);
  return {};
}

}  // namespace cadenza::loadgen
