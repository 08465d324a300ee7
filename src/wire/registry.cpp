#include "wire/registry.h"

#include <algorithm>
#include <cassert>

namespace cadenza::wire {
namespace {

bool is_integer(std::string_view s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Label values: integers (no sign, at most 18 digits) first and by value, so that layer "2" comes
// before "10"; everything else after them, byte by byte. (A strict weak order: integers are
// ordered by (length, bytes), which is their value when they have no leading zeros.)
bool value_less(const std::string& a, const std::string& b) {
  const bool ia = is_integer(a), ib = is_integer(b);
  if (ia != ib) return ia;
  if (ia && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace

bool Registry::LabelOrder::operator()(const Labels& a, const Labels& b) const {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i].first != b[i].first) return a[i].first < b[i].first;
    if (a[i].second != b[i].second) return value_less(a[i].second, b[i].second);
  }
  return a.size() < b.size();
}

void Registry::declare(std::string name, MetricType type, std::string help, WhenEmpty when_empty,
                       std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  assert(!index_.count(name) && "a metric family is declared once");
  if (index_.count(name)) return;
  Family f{name, type, std::move(help), when_empty, nullptr, {}, {}};
  if (type == MetricType::histogram)
    f.bounds = std::make_shared<const std::vector<double>>(std::move(bounds));
  index_.emplace(std::move(name), families_.size());
  families_.push_back(std::move(f));
}

Registry::Family* Registry::find(std::string_view name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &families_[it->second];
}

const Registry::Family* Registry::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &families_[it->second];
}

void Registry::inc(std::string_view name, const Labels& labels, double v) {
  std::lock_guard lock(mu_);
  Family* f = find(name);
  assert(f && f->type != MetricType::histogram && "inc() of an undeclared or histogram family");
  if (!f || f->type == MetricType::histogram) return;
  f->values[labels] += v;
}

void Registry::set(std::string_view name, const Labels& labels, double v) {
  std::lock_guard lock(mu_);
  Family* f = find(name);
  assert(f && f->type != MetricType::histogram && "set() of an undeclared or histogram family");
  if (!f || f->type == MetricType::histogram) return;
  f->values[labels] = v;
}

void Registry::observe(std::string_view name, const Labels& labels, double v) {
  std::lock_guard lock(mu_);
  Family* f = find(name);
  assert(f && f->type == MetricType::histogram && "observe() of an undeclared or non-histogram family");
  if (!f || f->type != MetricType::histogram) return;
  auto it = f->histograms.try_emplace(labels, f->bounds).first;
  it->second.observe(v);
}

void Registry::clear(std::string_view name) {
  std::lock_guard lock(mu_);
  if (Family* f = find(name)) {
    f->values.clear();
    f->histograms.clear();
  }
}

double Registry::value(std::string_view name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  const Family* f = find(name);
  if (!f) return 0;
  if (f->type == MetricType::histogram) {
    auto it = f->histograms.find(labels);
    return it == f->histograms.end() ? 0 : static_cast<double>(it->second.count());
  }
  auto it = f->values.find(labels);
  return it == f->values.end() ? 0 : it->second;
}

std::string Registry::render() const {
  std::string out;
  render(out);
  return out;
}

void Registry::render(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const Family& f : families_) {
    const bool empty = f.values.empty() && f.histograms.empty();
    if (empty && f.when_empty == WhenEmpty::omit) continue;
    write_header(out, f.name, f.type, f.help);
    if (f.type == MetricType::histogram) {
      for (const auto& [labels, h] : f.histograms) h.render(f.name, labels, out);
      if (empty && f.when_empty == WhenEmpty::zero) Histogram(f.bounds).render(f.name, {}, out);
    } else {
      for (const auto& [labels, v] : f.values) write_sample(out, f.name, labels, v);
      if (empty && f.when_empty == WhenEmpty::zero) write_sample(out, f.name, {}, 0);
    }
  }
}

}  // namespace cadenza::wire
