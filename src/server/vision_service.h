// VisionService: the image side of `serve --mmproj`: takes a request's image URLs, gets their
// bytes (data URLs, or fetched: image_source.h), decodes them (src/vision, bounded), runs the
// CLIP encoder + projector, and hands back one embedding matrix per image, off the I/O and
// engine threads.
//
//   auto vs = VisionService::create(options, model_n_embd, &metrics);
//   if (auto e = vs->check(urls)) -> 400;                     // cheap: count, URL forms, policy
//   vs->encode(urls, [](VisionResult r) { ... });              // later, on a vision thread
//
// Threads: `threads` workers (--vision-threads) take jobs (one request's images, in order) from
// a bounded queue; fetching and decoding run on them in parallel; the encoder runs one image at
// a time (it owns its scratch) on its own CPU backend with `threads` kernel threads, so it never
// shares a thread pool with the model's forward passes.
// Encoder-output cache: an LRU of embeddings keyed by the SHA-256 of the image's bytes, up to
// `cache_bytes` of floats; a hit skips decoding and encoding. The same digest names the image in
// the prefix cache (request/image_input.h), so a repeated image also reuses its KV blocks.
// Ownership: owns the encoder, its backend and the workers; the Metrics are borrowed (may be
// null) and must outlive it. Thread-safety: check, encode and the accessors from any thread.
// The destructor joins the workers; jobs still queued get a 503 error result.
#pragma once

#include <array>
#include <cstring>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "server/image_source.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "util/result.h"
#include "vision/clip_encoder.h"
#include "vision/image.h"

namespace cadenza::server {

struct VisionOptions {
  std::string mmproj;                 // --mmproj FILE
  int threads = 2;                    // --vision-threads: workers and encoder kernel threads
  int max_images_per_request = 8;     // --max-images-per-request
  size_t cache_bytes = 256u << 20;    // --vision-cache-mb: encoder outputs kept (0: no cache)
  size_t max_queue = 256;             // requests waiting for the workers at most (then 429)
  ImageSourcePolicy source;           // --max-image-bytes, --allowed-media-domains, --media-fetch-timeout
  vision::DecodeLimits decode;        // pixels per image and per side
};

// One encoded image: the digest of its bytes and its [tokens][n_embd] embeddings.
struct EncodedImage {
  std::array<uint8_t, 32> digest{};
  std::shared_ptr<const std::vector<float>> embeddings;
};

// What encode() hands back: every image of the request, or the first error (400 for a bad image
// or URL, 429 when the queue is full, 503 when shutting down, 500 when the encoder fails).
struct VisionResult {
  std::optional<ApiError> error;
  std::vector<EncodedImage> images;
};

class VisionService {
 public:
  // Loads the mmproj on a CPU backend and starts the workers. Errors: the file's (unreadable,
  // not a vision file, unsupported projector), a projector width that is not `model_n_embd`.
  static Result<std::unique_ptr<VisionService>> create(const VisionOptions& options,
                                                       int64_t model_n_embd, Metrics* metrics);
  ~VisionService();  // shutdown()
  // Stops the workers (a job being worked on finishes first; its callback runs) and fails the
  // queued jobs with a 503; later encode() calls fail the same way. Idempotent.
  void shutdown();
  VisionService(const VisionService&) = delete;
  VisionService& operator=(const VisionService&) = delete;

  // Prompt tokens one image takes (its embeddings' rows).
  int32_t tokens_per_image() const;
  // The encoder's config: the text around an image's tokens (image_begin / image_end) and
  // whether they attend to each other both ways (bidirectional_image).
  const vision::VisionConfig& config() const;
  const VisionOptions& options() const { return options_; }

  // The checks that need no work: the number of images, each URL's form (a data URL of an
  // allowed type, or an http(s) URL the policy allows). A 400 naming the image; nullopt: fine.
  std::optional<ApiError> check(const std::vector<std::string>& urls) const;

  // Queues the images of one request; `done` is called exactly once, on a worker thread (or on
  // this thread when the queue is full), with the embeddings in URL order or an error.
  void encode(std::vector<std::string> urls, std::function<void(VisionResult)> done);

  struct Stats {
    int64_t encoded = 0;      // images the encoder ran for
    int64_t cache_hits = 0;   // images the cache answered
    size_t cache_entries = 0;
  };
  Stats stats() const;

 private:
  struct Job {
    std::vector<std::string> urls;
    std::function<void(VisionResult)> done;
  };
  VisionService(const VisionOptions& options, Metrics* metrics);
  void worker();
  VisionResult run(const std::vector<std::string>& urls);
  // One image's embeddings (from the cache or encoded), or a 400/500.
  Result<EncodedImage> one(const std::string& url, size_t index, std::optional<ApiError>& error);
  std::shared_ptr<const std::vector<float>> cache_find(const std::array<uint8_t, 32>& digest);
  void cache_put(const std::array<uint8_t, 32>& digest, std::shared_ptr<const std::vector<float>> e);

  VisionOptions options_;
  Metrics* metrics_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<vision::VisionEncoder> encoder_;
  std::mutex encoder_mu_;  // one encode() at a time

  mutable std::mutex mu_;  // the queue, the cache and the stats
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  struct DigestHash {
    size_t operator()(const std::array<uint8_t, 32>& d) const {
      size_t h;
      std::memcpy(&h, d.data(), sizeof(h));
      return h;
    }
  };
  using LruList = std::list<std::pair<std::array<uint8_t, 32>, std::shared_ptr<const std::vector<float>>>>;
  LruList lru_;  // most recently used first
  std::unordered_map<std::array<uint8_t, 32>, LruList::iterator, DigestHash> cache_;
  size_t cache_used_ = 0;
  Stats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace cadenza::server
