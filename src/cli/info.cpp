// `cadenza info FILE [--json] [--items N]`: what a GGUF file holds: header facts, metadata (long
// arrays and strings abbreviated), the tensor table and a size summary. Exit 1 with the reader's
// message when the file does not open.
#include <cstdio>
#include <map>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/gguf.h"

namespace cadenza::cli {
namespace {

constexpr size_t kMaxStringBytes = 120;  // text output: long strings (chat templates) are cut

struct InfoOptions {
  std::string path;
  bool json = false;
  size_t items = 6;
};

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.2f} K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

std::string type_label(const gguf::Value& v) {
  if (v.type() != gguf::ValueType::ARRAY) return std::string(gguf::value_type_name(v.type()));
  return fmt::format("[{}]", gguf::value_type_name(v.element_type()));
}

std::string shape_label(const std::vector<int64_t>& shape) { return fmt::format("{}", fmt::join(shape, " x ")); }

struct TypeTotals {
  size_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};

struct Summary {
  int64_t parameters = 0;
  uint64_t bytes = 0;
  std::map<std::string, TypeTotals> by_type;  // sorted by type name for stable output
};

Summary summarize(const gguf::GgufFile& f) {
  Summary s;
  for (const auto& t : f.tensors()) {
    auto& tt = s.by_type[std::string(dtype_name(t.type))];
    ++tt.tensors;
    tt.elements += t.num_elements();
    tt.bytes += t.nbytes;
    s.parameters += t.num_elements();
    s.bytes += t.nbytes;
  }
  return s;
}

void print_text(const gguf::GgufFile& f, size_t items) {
  fmt::print("file:       {}\n", f.name());
  fmt::print("version:    {}\n", f.version());
  fmt::print("alignment:  {}\n", f.alignment());
  fmt::print("size:       {} ({} bytes), data section at offset {}\n", human_bytes(f.file_size()),
             f.file_size(), f.data_offset());

  size_t key_width = 0;
  for (const auto& [k, v] : f.metadata()) key_width = std::max(key_width, k.size());
  fmt::print("\nmetadata ({} keys):\n", f.metadata().size());
  for (const auto& [k, v] : f.metadata())
    fmt::print("  {:<{}}  {:<9} {}\n", k, key_width, type_label(v), v.to_display(items, kMaxStringBytes));

  size_t name_width = 4;
  for (const auto& t : f.tensors()) name_width = std::max(name_width, t.name.size());
  fmt::print("\ntensors ({}):\n", f.tensors().size());
  if (!f.tensors().empty())
    fmt::print("  {:<{}}  {:<7} {:<22} {:>12} {:>12}\n", "name", name_width, "type", "shape", "offset",
               "bytes");
  for (const auto& t : f.tensors())
    fmt::print("  {:<{}}  {:<7} {:<22} {:>12} {:>12}\n", t.name, name_width, dtype_name(t.type),
               shape_label(t.shape), t.offset, t.nbytes);

  const Summary s = summarize(f);
  fmt::print("\nsummary:\n");
  fmt::print("  parameters: {} ({})\n", human_count(s.parameters), s.parameters);
  for (const auto& [name, tt] : s.by_type)
    fmt::print("  {:<7} {:>4} tensors {:>12} elements {:>12}\n", name, tt.tensors, tt.elements,
               human_bytes(tt.bytes));
  fmt::print("  tensor data: {} ({} bytes)\n", human_bytes(s.bytes), s.bytes);
}

nlohmann::json value_json(const gguf::Value& v, size_t items) {
  using gguf::ValueType;
  switch (v.type()) {
    case ValueType::STRING: return *v.as_string();
    case ValueType::BOOL: return *v.as_bool();
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return *v.as_float();
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64: return *v.as_int();
    case ValueType::ARRAY: {
      // Arrays are summarised: a vocabulary would otherwise be megabytes of JSON.
      const auto& all = *v.as_array();
      nlohmann::json shown = nlohmann::json::array();
      for (size_t i = 0; i < std::min(items, all.size()); ++i) shown.push_back(value_json(all[i], items));
      return {{"element_type", gguf::value_type_name(v.element_type())},
              {"count", all.size()},
              {"items", std::move(shown)}};
    }
    default: return *v.as_uint();
  }
}

void print_json(const gguf::GgufFile& f, size_t items) {
  nlohmann::json j;
  j["file"] = f.name();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["file_size"] = f.file_size();
  j["data_offset"] = f.data_offset();
  nlohmann::json md = nlohmann::json::array();
  for (const auto& [k, v] : f.metadata()) {
    md.push_back({{"key", k},
                  {"type", gguf::value_type_name(v.type())},
                  {"value", value_json(v, items)}});
  }
  j["metadata"] = std::move(md);
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors())
    tensors.push_back({{"name", t.name},
                       {"type", dtype_name(t.type)},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"bytes", t.nbytes}});
  j["tensors"] = std::move(tensors);
  const Summary s = summarize(f);
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [name, tt] : s.by_type)
    by_type[name] = {{"tensors", tt.tensors}, {"elements", tt.elements}, {"bytes", tt.bytes}};
  j["summary"] = {{"parameters", s.parameters}, {"tensor_bytes", s.bytes}, {"by_type", by_type}};
  // Metadata strings are file bytes and need not be UTF-8: replace bad sequences, don't throw.
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

Command info_command() {
  auto opts = std::make_shared<InfoOptions>();
  Command c;
  c.name = "info";
  c.add = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and sizes");
    sub->add_option("file", opts->path, "GGUF file")->required();
    sub->add_flag("--json", opts->json, "Print JSON instead of text");
    sub->add_option("--items", opts->items, "Array items to show before abbreviating (default 6)");
  };
  c.run = [opts] {
    auto f = gguf::GgufFile::open(opts->path);
    if (!f) {
      fmt::print(stderr, "error: {}\n", f.error());
      return 1;
    }
    if (opts->json)
      print_json(**f, opts->items);
    else
      print_text(**f, opts->items);
    return 0;
  };
  return c;
}

}  // namespace cadenza::cli
