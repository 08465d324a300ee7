#include "server/model_catalog.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

namespace cadenza::server {

namespace fs = std::filesystem;

namespace {

bool has_gguf_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".gguf";
}

bool hidden(const fs::path& relative) {
  for (const fs::path& part : relative)
    if (!part.empty() && part.string()[0] == '.' && part != "." && part != "..") return true;
  return false;
}

}  // namespace

Result<std::vector<ModelSpec>> build_catalog(const std::string& models_dir,
                                             const std::vector<std::string>& model_args) {
  std::vector<ModelSpec> out;
  for (const std::string& arg : model_args) {
    ModelSpec spec;
    std::error_code ec;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos && arg.substr(0, eq).find('/') == std::string::npos &&
        !fs::is_regular_file(arg, ec)) {
      spec.name = arg.substr(0, eq);
      spec.path = arg.substr(eq + 1);
      if (spec.name.empty()) return make_error("-m '{}': the name before '=' is empty", arg);
    } else {
      spec.path = arg;
      spec.name = fs::path(arg).stem().string();
    }
    if (!fs::is_regular_file(spec.path, ec))
      return make_error("-m '{}': no such file '{}'", arg, spec.path);
    out.push_back(std::move(spec));
  }
  if (!models_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(models_dir, ec))
      return make_error("--models-dir '{}': not a directory", models_dir);
    std::vector<ModelSpec> found;
    fs::recursive_directory_iterator it(models_dir, fs::directory_options::skip_permission_denied,
                                        ec);
    if (ec) return make_error("--models-dir '{}': {}", models_dir, ec.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) return make_error("--models-dir '{}': {}", models_dir, ec.message());
      const fs::path relative = it->path().lexically_relative(models_dir);
      if (hidden(relative)) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file(ec) || !has_gguf_extension(it->path())) continue;
      fs::path name = relative;
      name.replace_extension();
      found.push_back({name.generic_string(), it->path().string()});
    }
    if (found.empty()) return make_error("--models-dir '{}': no .gguf files in it", models_dir);
    std::sort(found.begin(), found.end(),
              [](const ModelSpec& a, const ModelSpec& b) { return a.name < b.name; });
    for (ModelSpec& s : found) out.push_back(std::move(s));
  }
  if (out.empty()) return Error("no models: give --models-dir DIR or -m FILE");
  std::map<std::string, std::string> seen;
  for (const ModelSpec& s : out) {
    auto [it, fresh] = seen.emplace(s.name, s.path);
    if (!fresh)
      return make_error("two models are named '{}' ({} and {}): name one with -m NAME=FILE",
                        s.name, it->second, s.path);
  }
  return out;
}

}  // namespace cadenza::server
