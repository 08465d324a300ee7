#include "server/vision_service.h"

#include <chrono>
#include <memory>
#include <new>
#include <span>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_backend.h"
#include "vision/decode.h"

namespace cadenza::server {
namespace {

// The image's content key: SHA-256 over a domain tag and the encoded bytes. Byte-identical files
// decode identically, so equal digests mean equal embeddings.
std::array<uint8_t, 32> digest_of(std::string_view bytes) {
  static constexpr std::string_view kDomain = "cadenza.image.v1";
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const uint8_t zero = 0;
  std::array<uint8_t, 32> d{};
  const bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), kDomain.data(), kDomain.size()) == 1 &&
                  EVP_DigestUpdate(ctx.get(), &zero, 1) == 1 &&
                  EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx.get(), d.data(), nullptr) == 1;
  if (!ok) throw std::bad_alloc();  // only out of memory makes OpenSSL's SHA-256 fail
  return d;
}

ApiError image_error(size_t index, const std::string& what) {
  return bad_request(fmt::format("image {}: {}", index, what), "messages");
}

}  // namespace

Result<std::unique_ptr<VisionService>> VisionService::create(const VisionOptions& options,
                                                             int64_t model_n_embd,
                                                             Metrics* metrics) {
  if (options.threads < 1) return make_error("--vision-threads must be >= 1 (got {})", options.threads);
  if (options.max_images_per_request < 1)
    return make_error("--max-images-per-request must be >= 1 (got {})", options.max_images_per_request);
  auto vs = std::unique_ptr<VisionService>(new VisionService(options, metrics));
  vs->backend_ = kernels::make_cpu_backend({.n_threads = options.threads});
  auto encoder = vision::VisionEncoder::open(options.mmproj, *vs->backend_);
  if (!encoder) return make_error("--mmproj {}: {}", options.mmproj, encoder.error());
  const vision::VisionConfig& vc = (*encoder)->config();
  if (vc.n_out != model_n_embd)
    return make_error("--mmproj {}: the projector's output width {} is not the model's embedding "
                      "width {} (an mmproj for another model)", options.mmproj, vc.n_out, model_n_embd);
  vs->encoder_ = std::move(*encoder);
  for (int i = 0; i < options.threads; ++i) vs->workers_.emplace_back([p = vs.get()] { p->worker(); });
  spdlog::info("vision: {} ({}x{} images, {} tokens each), {} thread(s), cache {} MiB", options.mmproj,
               vc.image_size, vc.image_size, vc.n_image_tokens, options.threads, options.cache_bytes >> 20);
  return vs;
}

VisionService::VisionService(const VisionOptions& options, Metrics* metrics)
    : options_(options), metrics_(metrics) {}

VisionService::~VisionService() { shutdown(); }

void VisionService::shutdown() {
  std::deque<Job> left;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  for (Job& j : left)
    j.done({api_error(503, "the server is shutting down", "service_unavailable", "not_ready"), {}});
}

int32_t VisionService::tokens_per_image() const {
  return static_cast<int32_t>(encoder_->config().n_image_tokens);
}

const vision::VisionConfig& VisionService::config() const { return encoder_->config(); }

std::optional<ApiError> VisionService::check(const std::vector<std::string>& urls) const {
  if (urls.size() > static_cast<size_t>(options_.max_images_per_request))
    return bad_request(fmt::format("{} images in one request; this server takes at most {} "
                                   "(--max-images-per-request)",
                                   urls.size(), options_.max_images_per_request),
                       "messages");
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string& url = urls[i];
    if (is_data_url(url)) {  // the payload is decoded on a worker
      if (Status ok = check_data_url(url, options_.source.max_bytes); !ok)
        return image_error(i, ok.error());
      continue;
    }
    if (Status ok = check_remote_url(url, options_.source); !ok) return image_error(i, ok.error());
  }
  return std::nullopt;
}

void VisionService::encode(std::vector<std::string> urls, std::function<void(VisionResult)> done) {
  {
    std::lock_guard lock(mu_);
    if (!stop_ && queue_.size() < options_.max_queue) {
      queue_.push_back({std::move(urls), std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done({api_error(429, "too many requests are waiting for image encoding; retry later",
                  "rate_limit_error", "queue_full"),
        {}});
}

void VisionService::worker() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.done(run(job.urls));
  }
}

VisionResult VisionService::run(const std::vector<std::string>& urls) {
  VisionResult r;
  for (size_t i = 0; i < urls.size(); ++i) {
    std::optional<ApiError> error;
    auto im = one(urls[i], i, error);
    if (!im) {
      r.error = error ? *error : image_error(i, im.error());
      r.images.clear();
      return r;
    }
    r.images.push_back(std::move(*im));
  }
  return r;
}

Result<EncodedImage> VisionService::one(const std::string& url, size_t index,
                                        std::optional<ApiError>& error) {
  auto bytes = is_data_url(url) ? decode_data_url(url, options_.source.max_bytes)
                                : fetch_image(url, options_.source);
  if (!bytes) return bytes.error_value();
  EncodedImage out;
  out.digest = digest_of(*bytes);
  const auto tokens = static_cast<int64_t>(tokens_per_image());
  if (auto hit = cache_find(out.digest)) {
    out.embeddings = std::move(hit);
    if (metrics_) metrics_->add_vision_image(true, tokens, 0);
    return out;
  }
  auto image = vision::decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
      options_.decode);
  if (!image) return image.error_value();
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<float>> embd = [&] {
    const vision::NormalizedImage input = encoder_->preprocess(*image);
    std::lock_guard lock(encoder_mu_);
    return encoder_->encode(input);
  }();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!embd) {
    error = api_error(500, fmt::format("image {}: the vision encoder failed: {}", index, embd.error()),
                      "server_error");
    return embd.error_value();
  }
  out.embeddings = std::make_shared<const std::vector<float>>(std::move(*embd));
  cache_put(out.digest, out.embeddings);
  {
    std::lock_guard lock(mu_);
    ++stats_.encoded;
  }
  if (metrics_) metrics_->add_vision_image(false, tokens, seconds);
  return out;
}

std::shared_ptr<const std::vector<float>> VisionService::cache_find(const std::array<uint8_t, 32>& d) {
  std::lock_guard lock(mu_);
  auto it = cache_.find(d);
  if (it == cache_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used
  ++stats_.cache_hits;
  return it->second->second;
}

void VisionService::cache_put(const std::array<uint8_t, 32>& d,
                              std::shared_ptr<const std::vector<float>> e) {
  const size_t bytes = e->size() * sizeof(float);
  std::lock_guard lock(mu_);
  if (bytes > options_.cache_bytes || cache_.count(d) != 0) return;
  while (cache_used_ + bytes > options_.cache_bytes && !lru_.empty()) {
    cache_used_ -= lru_.back().second->size() * sizeof(float);
    cache_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(d, std::move(e));
  cache_[d] = lru_.begin();
  cache_used_ += bytes;
}

VisionService::Stats VisionService::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.cache_entries = cache_.size();
  return s;
}

}  // namespace cadenza::server
