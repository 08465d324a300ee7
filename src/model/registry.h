// The architecture registry: `general.architecture` strings mapped to the hooks of the family that
// implements them (arch/<family>.cpp). Adding an architecture = its file plus one line in
// registry.cpp's table (README.md, "Adding an architecture").
//
//   const ArchitectureFamily* f = ArchitectureRegistry::builtin().find("qwen3");
//
// A registry other than the built-in one (built-ins plus a family defined elsewhere, e.g. in a
// test) is passed through ModelLoadOptions::architectures.
// Thread-safety: a registry is immutable once built; builtin() may be read from any thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::model {

struct ModelConfig;
class MetadataReader;
class Network;
class WeightLoader;

// One family's hooks. A plain constant with static storage, e.g. (arch/qwen3.cpp)
//   extern const ArchitectureFamily qwen3_family{"qwen3", &configure, &load_network<Qwen3>};
struct ArchitectureFamily {
  std::string_view name;  // the `general.architecture` string (static storage)
  // Sets the family's flags and reads its own keys (RoPE layout, biases, Q/K norm, feed-forward
  // and expert keys with the family's defaults) after ModelConfig::from_gguf read the
  // architecture-independent ones. Errors name the file and the key.
  Status (*configure)(const MetadataReader& md, ModelConfig& config);
  // Loads the family's tensors (through its blocks' loaders) and returns its Network for
  // `config`, which outlives it (usually load_network<FamilyNetwork>, forward.h). Its scratch is
  // reserved afterwards (Network::reserve).
  Result<std::unique_ptr<Network>> (*load)(const ModelConfig& config, WeightLoader& loader);
};

class ArchitectureRegistry {
 public:
  ArchitectureRegistry() = default;  // empty
  // The families in src/model/arch, in the order of registry.cpp's table.
  static const ArchitectureRegistry& builtin();

  // Adds a family. Errors: an empty name, a missing hook, a name already registered.
  Status add(const ArchitectureFamily& family);
  // The family registered under `name`, or null.
  const ArchitectureFamily* find(std::string_view name) const;
  // Every registered name, in registration order (for "supported: ..." messages).
  std::vector<std::string_view> names() const;

 private:
  std::vector<ArchitectureFamily> families_;
};

}  // namespace cadenza::model
