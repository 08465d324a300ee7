// The catalog of router mode (`cadenza serve --models-dir DIR`, several `-m`): which models the
// server can serve, under which names.
//
// Naming rule (docs/server.md):
//   -m FILE          the file's name without its .gguf extension ("models/qwen-0.5b.gguf" ->
//                    "qwen-0.5b")
//   -m NAME=FILE     NAME (text before the first '=', when it has no '/' and the whole argument
//                    is not an existing file)
//   --models-dir DIR every *.gguf (any case) under DIR, subfolders included, named by its path
//                    relative to DIR without the extension ("a.gguf" -> "a", "x/b.gguf" ->
//                    "x/b"); hidden files and folders (a leading '.') are skipped.
// Names must be distinct (an error names both files). Order: the -m models, then DIR's sorted.
// Thread-safety: pure functions (reads the file system).
#pragma once

#include <string>
#include <vector>

#include "server/model_pool.h"
#include "util/result.h"

namespace cadenza::server {

// Errors: a missing or unreadable DIR, a DIR without models, a -m file that does not exist, an
// empty NAME, duplicate names, no model at all.
Result<std::vector<ModelSpec>> build_catalog(const std::string& models_dir,
                                             const std::vector<std::string>& model_args);

}  // namespace cadenza::server
