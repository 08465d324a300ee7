#include "hub_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace cadenza::hub::testing {
namespace {

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string response_head(int status, const char* reason, const std::vector<std::string>& headers,
                          size_t content_length) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  for (const auto& x : headers) h += x + "\r\n";
  h += "Content-Length: " + std::to_string(content_length) + "\r\nConnection: close\r\n\r\n";
  return h;
}

}  // namespace

HubServer::HubServer() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0)
    std::abort();
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { loop(); });
}

HubServer::~HubServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  thread_.join();
  ::close(listen_fd_);
}

void HubServer::add(const std::string& path, ServedFile file) {
  std::lock_guard lock(mu_);
  files_[path] = std::move(file);
}

std::vector<std::string> HubServer::ranges() const {
  std::lock_guard lock(mu_);
  return ranges_;
}

std::vector<std::string> HubServer::authorizations() const {
  std::lock_guard lock(mu_);
  return auths_;
}

void HubServer::loop() {
  while (!stop_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stop_) return;
      continue;
    }
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    serve(fd);
    ::close(fd);
  }
}

void HubServer::serve(int fd) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  std::istringstream in(req);
  std::string method, target, version, line;
  in >> method >> target >> version;
  std::getline(in, line);
  std::map<std::string, std::string> headers;
  while (std::getline(in, line) && line != "\r" && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    headers[lower(line.substr(0, colon))] = v;
  }
  const std::string range = headers.count("range") ? headers["range"] : "";
  const std::string auth = headers.count("authorization") ? headers["authorization"] : "";

  std::unique_lock lock(mu_);
  ranges_.push_back(range);
  auths_.push_back(auth);
  const bool cdn = target.rfind("/cdn", 0) == 0;
  const std::string path = cdn ? target.substr(4) : target;
  auto it = files_.find(path);
  if (it == files_.end() || method != "GET") {
    lock.unlock();
    const std::string body = "Entry not found";
    send_all(fd, response_head(404, "Not Found", {}, body.size()) + body);
    return;
  }
  ServedFile& f = it->second;
  if (!f.token.empty() && auth != "Bearer " + f.token) {
    lock.unlock();
    const std::string body = R"({"error":"Invalid credentials in Authorization header"})";
    send_all(fd, response_head(401, "Unauthorized", {}, body.size()) + body);
    return;
  }
  if (!f.linked_etag.empty() && !cdn) {
    const std::vector<std::string> h = {"Location: /cdn" + path,
                                        "X-Linked-Etag: \"" + f.linked_etag + "\"",
                                        "X-Linked-Size: " + std::to_string(f.body.size())};
    lock.unlock();
    send_all(fd, response_head(302, "Found", h, 0));
    return;
  }
  const std::string body = f.body;
  std::vector<std::string> h;
  if (!f.etag.empty()) h.push_back("ETag: \"" + f.etag + "\"");
  const bool drop = f.drop_first > 0;
  if (drop) --f.drop_first;
  const bool ignore_range = f.ignore_range;
  lock.unlock();

  size_t first = 0;
  int status = 200;
  const char* reason = "OK";
  if (!range.empty() && !ignore_range && range.rfind("bytes=", 0) == 0) {
    first = std::strtoull(range.c_str() + 6, nullptr, 10);
    if (first >= body.size()) {
      h.push_back("Content-Range: bytes */" + std::to_string(body.size()));
      send_all(fd, response_head(416, "Range Not Satisfiable", h, 0));
      return;
    }
    status = 206;
    reason = "Partial Content";
    h.push_back("Content-Range: bytes " + std::to_string(first) + "-" +
                std::to_string(body.size() - 1) + "/" + std::to_string(body.size()));
  }
  const std::string part = body.substr(first);
  if (drop) {
    // The full length is announced, half is sent, then the connection ends.
    send_all(fd, response_head(status, reason, h, part.size()) + part.substr(0, part.size() / 2));
    return;
  }
  send_all(fd, response_head(status, reason, h, part.size()) + part);
}

}  // namespace cadenza::hub::testing
