// The tokenizer test-vector format of ../shared/tokenizer (and of the reference engine's
// models/ folder): ggml-vocab-NAME.gguf, its .inp (texts, each followed by the line
// "__ggml_vocab_test__") and .out (one line of space-separated ids per text).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The texts of a .inp file. Each text is followed by "\n__ggml_vocab_test__\n"; a last text
// without the separator (some files end that way) counts when it is not empty.
inline std::vector<std::string> read_vector_texts(const std::filesystem::path& p) {
  const std::string all = read_file(p);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < all.size()) {
    const size_t at = all.find(sep, pos);
    if (at == std::string::npos) {
      texts.push_back(all.substr(pos));
      break;
    }
    texts.push_back(all.substr(pos, at - pos));
    pos = at + sep.size();
  }
  return texts;
}

// The id lines of a .out file.
inline std::vector<std::vector<int32_t>> read_vector_ids(const std::filesystem::path& p) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream in(read_file(p));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id = 0;
    while (ls >> id) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

// A text for failure messages: newlines, tabs and carriage returns as escapes.
inline std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// Ids as the .out files write them: space-separated.
inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out.push_back(' ');
    out.append(std::to_string(id));
  }
  return out;
}

}  // namespace cadenza::test
