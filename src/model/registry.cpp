#include "model/registry.h"

#include <cassert>

namespace cadenza::model {

// The built-in families: one line each. CADENZA_FAMILY(x) names the constant `x_family` that
// arch/x.cpp defines (`extern const ArchitectureFamily x_family{"<general.architecture>", ...}`).
#define CADENZA_BUILTIN_FAMILIES(CADENZA_FAMILY) \
  CADENZA_FAMILY(llama)                          \
  CADENZA_FAMILY(qwen2)                          \
  CADENZA_FAMILY(qwen3)                          \
  CADENZA_FAMILY(qwen3moe)                       \
  CADENZA_FAMILY(qwen2moe)                       \
  CADENZA_FAMILY(deepseek2)                      \
  CADENZA_FAMILY(glm4moe)                        \
  CADENZA_FAMILY(gpt_oss)                        \
  CADENZA_FAMILY(gemma3)                         \
  CADENZA_FAMILY(phi3)                           \
  CADENZA_FAMILY(mistral3)                       \
  CADENZA_FAMILY(granite)                        \
  CADENZA_FAMILY(qwen35)                         \
  CADENZA_FAMILY(qwen35moe)                      \
  CADENZA_FAMILY(llama4)                         \
  CADENZA_FAMILY(granitehybrid)

namespace arch {
#define CADENZA_DECLARE_FAMILY(x) extern const ArchitectureFamily x##_family;
CADENZA_BUILTIN_FAMILIES(CADENZA_DECLARE_FAMILY)
#undef CADENZA_DECLARE_FAMILY
}  // namespace arch

#define CADENZA_FAMILY_ADDRESS(x) &arch::x##_family,
const ArchitectureFamily* const kBuiltinFamilies[] = {CADENZA_BUILTIN_FAMILIES(CADENZA_FAMILY_ADDRESS)};
#undef CADENZA_FAMILY_ADDRESS
#undef CADENZA_BUILTIN_FAMILIES

const ArchitectureRegistry& ArchitectureRegistry::builtin() {
  static const ArchitectureRegistry registry = [] {
    ArchitectureRegistry r;
    for (const ArchitectureFamily* f : kBuiltinFamilies) {
      [[maybe_unused]] const Status added = r.add(*f);
      assert(added && "a built-in family is malformed or listed twice");
    }
    return r;
  }();
  return registry;
}

Status ArchitectureRegistry::add(const ArchitectureFamily& family) {
  if (family.name.empty()) return Error("architecture registry: a family without a name");
  if (!family.configure || !family.load) {
    return make_error("architecture registry: family '{}' lacks a hook", family.name);
  }
  if (find(family.name)) {
    return make_error("architecture registry: '{}' is already registered", family.name);
  }
  families_.push_back(family);
  return {};
}

const ArchitectureFamily* ArchitectureRegistry::find(std::string_view name) const {
  for (const ArchitectureFamily& f : families_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string_view> ArchitectureRegistry::names() const {
  std::vector<std::string_view> out;
  for (const ArchitectureFamily& f : families_) out.push_back(f.name);
  return out;
}

}  // namespace cadenza::model
