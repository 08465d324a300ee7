#include "hub/source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace cadenza::hub {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool name_ok(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

std::string percent_encode_path(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '~' || c == '-' || c == '/')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

bool ends_with_gguf(const std::string& name) {
  if (name.size() < 5) return false;
  std::string ext = name.substr(name.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".gguf";
}

std::string trim_endpoint(std::string e) {
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

}  // namespace

Hub hub_of(const std::string& ref) {
  if (starts_with(ref, "hf://")) return Hub::kHuggingFace;
  if (starts_with(ref, "ms://")) return Hub::kModelScope;
  return Hub::kNone;
}

const char* default_endpoint(Hub hub) {
  return hub == Hub::kModelScope ? kModelScopeEndpoint : kDefaultEndpoint;
}

bool is_remote(const std::string& ref) {
  return hub_of(ref) != Hub::kNone || starts_with(ref, "https://") || starts_with(ref, "http://");
}

Result<Source> resolve_source(const std::string& ref, const std::string& endpoint_in) {
  const Hub hub = hub_of(ref);
  const std::string endpoint =
      trim_endpoint(endpoint_in.empty() ? default_endpoint(hub) : endpoint_in);
  if (!starts_with(endpoint, "https://") && !starts_with(endpoint, "http://"))
    return make_error("endpoint '{}' must start with https:// or http://", endpoint);
  Source s;
  if (hub != Hub::kNone) {
    const char* scheme = hub == Hub::kModelScope ? "ms" : "hf";
    const std::string rest = ref.substr(5);
    std::vector<std::string> parts;
    size_t b = 0;
    while (true) {
      const size_t e = rest.find('/', b);
      parts.push_back(rest.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    if (parts.size() < 3) return make_error("'{}': expected {}://ORG/REPO/FILE.gguf", ref, scheme);
    std::string repo_name = parts[1];
    // The hubs' default branches: Hugging Face's is main, ModelScope's master.
    s.revision = hub == Hub::kModelScope ? "master" : "main";
    if (auto at = repo_name.find('@'); at != std::string::npos) {
      s.revision = repo_name.substr(at + 1);
      repo_name = repo_name.substr(0, at);
      if (s.revision.empty()) return make_error("'{}': empty revision after '@'", ref);
      for (char c : s.revision)
        if (c == '/' || static_cast<unsigned char>(c) <= 0x20)
          return make_error("'{}': bad revision '{}'", ref, s.revision);
    }
    if (!name_ok(parts[0]) || !name_ok(repo_name))
      return make_error("'{}': ORG and REPO must be made of letters, digits, '.', '_' and '-'",
                        ref);
    std::string path;
    for (size_t i = 2; i < parts.size(); ++i) {
      const std::string& p = parts[i];
      if (p.empty() || p == "." || p == "..")
        return make_error("'{}': empty, '.' or '..' path segment", ref);
      for (unsigned char c : p)
        if (c < 0x20 || c == 0x7f) return make_error("'{}': control character in the path", ref);
      if (!path.empty()) path += '/';
      path += p;
    }
    s.file_name = parts.back();
    s.repo = parts[0] + "/" + repo_name;
    s.path = path;
    s.hub = hub;
    s.is_hub = true;
    if (hub == Hub::kModelScope) {
      s.url = fmt::format("{}/models/{}/resolve/{}/{}", endpoint, s.repo,
                          percent_encode_path(s.revision), percent_encode_path(path));
      s.file_list_url = fmt::format("{}/api/v1/models/{}/repo/files?Revision={}&Recursive=true",
                                    endpoint, s.repo, percent_encode_path(s.revision));
    } else {
      s.url = fmt::format("{}/{}/resolve/{}/{}", endpoint, s.repo,
                          percent_encode_path(s.revision), percent_encode_path(path));
    }
  } else if (starts_with(ref, "https://") || starts_with(ref, "http://")) {
    for (unsigned char c : ref)
      if (c <= 0x20 || c == 0x7f)
        return make_error("'{}': spaces or control characters in the URL", ref);
    s.url = ref;
    std::string path = ref.substr(ref.find("//") + 2);
    path = path.substr(0, path.find_first_of("?#"));
    const size_t slash = path.find('/');
    if (slash == std::string::npos) return make_error("'{}': the URL names no file", ref);
    s.file_name = path.substr(path.rfind('/') + 1);
    if (s.file_name.empty() || s.file_name == "." || s.file_name == "..")
      return make_error("'{}': the URL names no file", ref);
    for (char c : s.file_name)
      if (c == '%' || c == '\\')
        return make_error("'{}': unsupported characters in the file name", ref);
  } else {
    return make_error("'{}': expected hf://ORG/REPO/FILE.gguf, ms://ORG/REPO/FILE.gguf or an "
                      "https:// URL",
                      ref);
  }
  if (!ends_with_gguf(s.file_name))
    return make_error("'{}': the file name '{}' does not end in .gguf", ref, s.file_name);
  return s;
}

bool token_allowed(const Source& source, const std::string& endpoint_in) {
  if (source.is_hub) return true;
  const std::string endpoint =
      trim_endpoint(endpoint_in.empty() ? default_endpoint(source.hub) : endpoint_in);
  return source.url.rfind(endpoint + "/", 0) == 0;
}

}  // namespace cadenza::hub
