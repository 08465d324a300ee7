#include "server/embeddings_protocol.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

namespace cadenza::server {

using nlohmann::json;

namespace {

// A JSON array of token ids into `out`; false (untouched meaning) when any element is not an
// integer in [0, 2^31).
bool token_array(const json& a, std::vector<int32_t>& out) {
  out.clear();
  out.reserve(a.size());
  for (const json& t : a) {
    if (!t.is_number_integer()) return false;
    if (t.is_number_unsigned() ? t.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX))
      return false;
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return true;
}

std::optional<ApiError> read_model(const json& body, std::string& model) {
  if (!body.contains("model") || body.at("model").is_null()) return std::nullopt;
  if (!body.at("model").is_string()) return bad_request("'model' must be a string", "model");
  model = body.at("model").get<std::string>();
  return std::nullopt;
}

// A positive integer field, when present and not null.
std::optional<ApiError> read_positive(const json& body, const char* key,
                                      std::optional<int64_t>& out) {
  if (!body.contains(key) || body.at(key).is_null()) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 1) ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    return bad_request(fmt::format("'{}' must be a positive integer", key), key);
  out = v.get<int64_t>();
  if (*out < 1) return bad_request(fmt::format("'{}' must be a positive integer", key), key);
  return std::nullopt;
}

}  // namespace

ParsedEmbeddings parse_embeddings_request(const json& body) {
  ParsedEmbeddings p;
  auto fail = [&](ApiError e) {
    p.error = std::move(e);
    return std::move(p);
  };
  EmbeddingsRequest& r = p.request;
  if (auto e = read_model(body, r.model)) return fail(*e);
  if (!body.contains("input")) return fail(bad_request("'input' is required", "input"));
  const json& in = body.at("input");
  const char* shape =
      "'input' must be a string, an array of strings, an array of token ids or an array of "
      "arrays of token ids";
  if (in.is_string()) {
    r.inputs.push_back({false, in.get<std::string>(), {}});
  } else if (in.is_array()) {
    if (in.empty()) return fail(bad_request("'input' must not be empty", "input"));
    if (in.size() > kMaxEmbeddingInputs)
      return fail(bad_request(fmt::format("'input' has {} items, more than the {} allowed",
                                          in.size(), kMaxEmbeddingInputs), "input"));
    if (in.front().is_number()) {  // one sequence of token ids
      EmbeddingInput one{true, {}, {}};
      if (!token_array(in, one.tokens)) return fail(bad_request(shape, "input"));
      r.inputs.push_back(std::move(one));
    } else {
      for (const json& item : in) {
        if (item.is_string()) {
          r.inputs.push_back({false, item.get<std::string>(), {}});
        } else if (item.is_array()) {
          EmbeddingInput one{true, {}, {}};
          if (item.empty() || !token_array(item, one.tokens))
            return fail(bad_request(shape, "input"));
          r.inputs.push_back(std::move(one));
        } else {
          return fail(bad_request(shape, "input"));
        }
      }
    }
  } else {
    return fail(bad_request(shape, "input"));
  }
  for (const EmbeddingInput& one : r.inputs)
    if (!one.is_tokens && one.text.empty())
      return fail(bad_request("'input' must not contain empty strings", "input"));
  if (body.contains("encoding_format") && !body.at("encoding_format").is_null()) {
    const json& f = body.at("encoding_format");
    if (f == "base64") {
      r.base64 = true;
    } else if (f != "float") {
      return fail(bad_request("'encoding_format' must be \"float\" or \"base64\"",
                              "encoding_format"));
    }
  }
  if (auto e = read_positive(body, "dimensions", r.dimensions)) return fail(*e);
  if (body.contains("user") && !body.at("user").is_null() && !body.at("user").is_string())
    return fail(bad_request("'user' must be a string", "user"));
  return p;
}

ParsedRerank parse_rerank_request(const json& body) {
  ParsedRerank p;
  auto fail = [&](ApiError e) {
    p.error = std::move(e);
    return std::move(p);
  };
  RerankRequest& r = p.request;
  if (auto e = read_model(body, r.model)) return fail(*e);
  if (!body.contains("query") || !body.at("query").is_string() ||
      body.at("query").get_ref<const std::string&>().empty())
    return fail(bad_request("'query' must be a non-empty string", "query"));
  r.query = body.at("query").get<std::string>();
  if (!body.contains("documents") || !body.at("documents").is_array() ||
      body.at("documents").empty())
    return fail(bad_request("'documents' must be a non-empty array", "documents"));
  const json& docs = body.at("documents");
  if (docs.size() > kMaxRerankDocuments)
    return fail(bad_request(fmt::format("'documents' has {} items, more than the {} allowed",
                                        docs.size(), kMaxRerankDocuments), "documents"));
  for (const json& d : docs) {
    if (d.is_string()) {
      r.documents.push_back(d.get<std::string>());
    } else if (d.is_object() && d.contains("text") && d.at("text").is_string()) {
      r.documents.push_back(d.at("text").get<std::string>());
    } else {
      return fail(bad_request("each document must be a string or an object with a string 'text'",
                              "documents"));
    }
  }
  if (auto e = read_positive(body, "top_n", r.top_n)) return fail(*e);
  if (body.contains("return_documents") && !body.at("return_documents").is_null()) {
    if (!body.at("return_documents").is_boolean())
      return fail(bad_request("'return_documents' must be a boolean", "return_documents"));
    r.return_documents = body.at("return_documents").get<bool>();
  }
  if (body.contains("instruction") && !body.at("instruction").is_null()) {
    if (!body.at("instruction").is_string())
      return fail(bad_request("'instruction' must be a string", "instruction"));
    r.instruction = body.at("instruction").get<std::string>();
  }
  return p;
}

std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  // Little-endian bytes, whatever the host order (OpenAI's clients decode float32 LE).
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<uint8_t>(bits >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) |
                       (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

json embeddings_response(const std::vector<std::vector<float>>& vectors, bool base64,
                         const std::string& model, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      item["embedding"] = base64_floats(vectors[i]);
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

json rerank_response(const RerankRequest& request, const std::vector<double>& scores,
                     const std::string& model, int64_t prompt_tokens) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (request.top_n && static_cast<size_t>(*request.top_n) < order.size())
    order.resize(static_cast<size_t>(*request.top_n));
  json results = json::array();
  for (size_t i : order) {
    json item = {{"index", i}, {"relevance_score", scores[i]}};
    if (request.return_documents) item["document"] = {{"text", request.documents[i]}};
    results.push_back(std::move(item));
  }
  return {{"model", model},
          {"object", "list"},
          {"results", std::move(results)},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace cadenza::server
