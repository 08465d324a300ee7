#include "gateway/upstream.h"

#include <algorithm>

namespace cadenza::gateway {

Upstream::Upstream(std::string address, boost::asio::ip::tcp::endpoint endpoint,
                   std::shared_ptr<const UpstreamTls> tls)
    : address_(std::move(address)), endpoint_(std::move(endpoint)), tls_(std::move(tls)) {}

bool Upstream::eligible(Clock::time_point now) const {
  if (!healthy.load()) return false;
  std::lock_guard lock(mu_);
  switch (state_) {
    case State::closed:
      return true;
    case State::open:
      return now >= open_until_;
    case State::half_open:
      return false;  // its probe is in flight
  }
  return false;
}

bool Upstream::breaker_open(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return state_ == State::half_open || (state_ == State::open && now < open_until_);
}

void Upstream::on_dispatch(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (state_ == State::open && now >= open_until_) state_ = State::half_open;
}

void Upstream::on_success() {
  std::lock_guard lock(mu_);
  state_ = State::closed;
  failures_ = 0;
  open_ms_ = 0;
}

bool Upstream::on_failure(Clock::time_point now, const BreakerSettings& s) {
  std::lock_guard lock(mu_);
  ++failures_;
  if (state_ == State::half_open) {
    open_ms_ = std::min(std::max(open_ms_, s.eject_ms) * 2, s.max_eject_ms);
  } else if (state_ == State::closed && failures_ >= s.eject_after_failures) {
    open_ms_ = s.eject_ms;
  } else {
    return false;
  }
  state_ = State::open;
  open_until_ = now + std::chrono::milliseconds(open_ms_);
  idle_.clear();
  return true;
}

std::unique_ptr<UpstreamStream> Upstream::take_idle() {
  std::lock_guard lock(mu_);
  if (idle_.empty()) return nullptr;
  auto s = std::move(idle_.back());
  idle_.pop_back();
  return s;
}

void Upstream::put_idle(std::unique_ptr<UpstreamStream> s) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(s));
}

void Upstream::drop_idle() {
  std::lock_guard lock(mu_);
  idle_.clear();
}

VersionPool::VersionPool(std::string model, VersionConfig cfg,
                         std::shared_ptr<boost::asio::ssl::context> tls_ctx)
    : model_(std::move(model)),
      key_(cfg.version.empty() ? model_ : model_ + "@" + cfg.version),
      cfg_(std::move(cfg)),
      tls_ctx_(std::move(tls_ctx)),
      set_(std::make_shared<ReplicaSet>()) {}

std::shared_ptr<const ReplicaSet> VersionPool::replicas() const {
  std::lock_guard lock(mu_);
  return set_;
}

void VersionPool::set_replicas(std::vector<std::shared_ptr<Upstream>> ups, int virtual_nodes) {
  auto set = std::make_shared<ReplicaSet>();
  std::vector<std::string> ids;
  for (const auto& u : ups) ids.push_back(u->address());
  set->ring = HashRing(ids, virtual_nodes);
  set->replicas = std::move(ups);
  std::lock_guard lock(mu_);
  set_ = std::move(set);
}

VersionPool* ModelPool::pick_version(double u) const {
  std::vector<double> w;
  for (const auto& v : versions) w.push_back(v->config().weight);
  const int i = pick_weighted(w, u);
  return i < 0 ? nullptr : versions[static_cast<size_t>(i)].get();
}

VersionPool* ModelPool::find_version(const std::string& version) const {
  for (const auto& v : versions)
    if (v->config().version == version) return v.get();
  return nullptr;
}

}  // namespace cadenza::gateway
