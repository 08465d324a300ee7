#include "hub/pull.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "hub/sha256.h"

namespace cadenza::hub {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

std::string human_seconds(double s) {
  if (!(s >= 0) || s > 99 * 3600) return "?";
  const auto t = static_cast<int64_t>(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// An exclusive advisory lock on PATH (a separate lock file); released when destroyed.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error_ = fmt::format("cannot create '{}': {}", path, std::strerror(errno));
      return;
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      error_ = fmt::format("another cadenza pull is downloading this file (lock '{}')", path);
      ::close(fd_);
      fd_ = -1;
      return;
    }
    path_ = path;
  }
  ~FileLock() {
    if (fd_ >= 0) {
      std::error_code ec;
      fs::remove(path_, ec);
      ::close(fd_);
    }
  }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string error_;
};

void info(const PullOptions& o, const std::string& s) {
  if (o.on_info) o.on_info(s);
}

const char* token_env(Hub hub) {
  return hub == Hub::kModelScope ? "MODELSCOPE_API_TOKEN" : "HF_TOKEN";
}

// ModelScope publishes no checksum header on its downloads; its API lists every file of a
// revision with its SHA-256. The digest of source.path there, or "" when the list cannot be read
// or does not name the file (reported: the download then goes on unverified, and a file that does
// not exist fails with the download's own 404).
std::string modelscope_sha256(const PullOptions& o, const Source& source, const std::string& token) {
  // A listing is ~300 bytes a file; 32 MiB covers repositories of 100,000 files.
  auto text = fetch_text(source.file_list_url, token, size_t{32} << 20, o.connect_timeout_s,
                         o.stall_timeout_s);
  if (!text) {
    info(o, fmt::format("cannot read ModelScope's file list ({}): the SHA-256 is not verified",
                        text.error()));
    return "";
  }
  const auto list = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* files = nullptr;
  if (list.is_object() && list.contains("Data") && list["Data"].is_object() &&
      list["Data"].contains("Files") && list["Data"]["Files"].is_array())
    files = &list["Data"]["Files"];
  if (!files) {
    info(o, fmt::format("ModelScope's file list from {} has no Data.Files: the SHA-256 is not "
                        "verified",
                        source.file_list_url));
    return "";
  }
  for (const auto& f : *files) {
    if (!f.is_object() || !f.contains("Path") || !f["Path"].is_string()) continue;
    if (f["Path"].get<std::string>() != source.path) continue;
    if (f.contains("Sha256") && f["Sha256"].is_string()) {
      std::string sha = as_sha256(f["Sha256"].get<std::string>());
      if (!sha.empty()) return sha;
    }
    break;
  }
  info(o, fmt::format("ModelScope lists no SHA-256 for {} in {}@{}: it is not verified",
                      source.path, source.repo, source.revision));
  return "";
}

}  // namespace

std::string default_cache_dir() {
  if (auto d = env("CADENZA_CACHE_DIR"); !d.empty()) return d;
  if (auto d = env("XDG_CACHE_HOME"); !d.empty()) return (fs::path(d) / "cadenza").string();
  if (auto d = env("HOME"); !d.empty()) return (fs::path(d) / ".cache" / "cadenza").string();
  return ".cadenza-cache";
}

void apply_environment(PullOptions& o) {
  if (hub_of(o.source) == Hub::kModelScope) {
    if (o.token.empty()) o.token = env("MODELSCOPE_API_TOKEN");
    // MODELSCOPE_DOMAIN is the ModelScope SDK's variable: a host name, no scheme.
    if (o.endpoint.empty()) o.endpoint = env("MODELSCOPE_ENDPOINT");
    if (o.endpoint.empty() && !env("MODELSCOPE_DOMAIN").empty())
      o.endpoint = "https://" + env("MODELSCOPE_DOMAIN");
    return;
  }
  if (o.token.empty()) o.token = env("HF_TOKEN");
  if (o.endpoint.empty()) o.endpoint = env("HF_ENDPOINT");
}

std::string progress_line(const std::string& name, const DownloadProgress& p) {
  const double rate = p.seconds > 0 ? static_cast<double>(p.done - p.resumed_from) / p.seconds : 0;
  if (p.total > 0) {
    const double pct = 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total);
    const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1;
    return fmt::format("{}  {} / {}  {:.1f}%  {}/s  ETA {}", name, human_bytes(p.done),
                       human_bytes(p.total), pct, human_bytes(rate), human_seconds(eta));
  }
  return fmt::format("{}  {}  {}/s", name, human_bytes(p.done), human_bytes(rate));
}

Result<PullResult> pull(const PullOptions& o) {
  auto source = resolve_source(o.source, o.endpoint);
  if (!source) return source.error_value();
  std::string expected;
  if (!o.sha256.empty()) {
    expected = as_sha256(o.sha256);
    if (expected.empty()) return make_error("--sha256 '{}': expected 64 hex digits", o.sha256);
  }

  fs::path dir;
  if (!o.output_dir.empty()) {
    dir = o.output_dir;
  } else {
    dir = fs::path(default_cache_dir());
    if (source->hub == Hub::kHuggingFace) {
      dir = dir / "hf" / source->repo;
      if (source->revision != "main") dir /= source->revision;
    } else if (source->hub == Hub::kModelScope) {
      dir = dir / "ms" / source->repo;
      if (source->revision != "master") dir /= source->revision;
    } else {
      dir /= "url";
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create '{}': {}", dir.string(), ec.message());
  const std::string dest = (dir / source->file_name).string();
  const std::string partial = dest + ".partial";

  PullResult result;
  result.path = dest;
  if (fs::exists(dest) && !o.force) {
    result.size = static_cast<int64_t>(fs::file_size(dest, ec));
    if (!expected.empty()) {
      auto have = sha256_file(dest);
      if (!have) return have.error_value();
      if (*have != expected)
        return make_error(
            "'{}' exists but its SHA-256 is {}, not {}; pass --force to download "
            "it again",
            dest, *have, expected);
      result.sha256 = *have;
    }
    info(o, fmt::format("{} is already there", dest));
    return result;
  }

  FileLock lock(dest + ".lock");
  if (!lock.error().empty()) return Error(lock.error());
  if (o.force) {
    fs::remove(partial, ec);
  } else if (fs::exists(partial)) {
    info(o, fmt::format("resuming {} ({} bytes already here)", source->url,
                        fs::file_size(partial, ec)));
  }

  DownloadOptions d;
  d.url = source->url;
  d.partial_path = partial;
  if (token_allowed(*source, o.endpoint)) d.bearer_token = o.token;
  d.token_env = token_env(source->hub);
  // ModelScope: the digest comes from its API, asked before the transfer so that a resumed
  // download is checked against the same revision's digest.
  if (expected.empty() && source->hub == Hub::kModelScope)
    expected = modelscope_sha256(o, *source, d.bearer_token);
  d.connect_timeout_s = o.connect_timeout_s;
  d.stall_timeout_s = o.stall_timeout_s;
  d.on_progress = o.on_progress;
  auto got = download(d);
  if (!got) return got.error_value();
  result.downloaded = true;
  result.size = got->size;
  result.resumed_from = got->resumed_from;

  if (expected.empty()) expected = as_sha256(got->linked_etag);
  if (expected.empty()) expected = as_sha256(got->etag);
  if (!expected.empty()) {
    auto have = sha256_file(partial);
    if (!have) return have.error_value();
    if (*have != expected) {
      fs::remove(partial, ec);
      return make_error(
          "checksum mismatch for {}: expected SHA-256 {}, got {}; the download was "
          "deleted (run again to start over)",
          source->url, expected, *have);
    }
    result.sha256 = *have;
  } else {
    info(o, "the server publishes no SHA-256 for this file (pass --sha256 to verify it)");
  }

  if (o.validate_gguf) {
    auto file = gguf::GgufFile::open(partial);
    if (!file) {
      fs::remove(partial, ec);
      return make_error("{} is not a valid GGUF file ({}); the download was deleted", source->url,
                        file.error());
    }
  }
  fs::rename(partial, dest, ec);
  if (ec) return make_error("cannot rename '{}' to '{}': {}", partial, dest, ec.message());
  return result;
}

}  // namespace cadenza::hub
