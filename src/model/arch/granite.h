// Granite's multipliers, read by the dense `granite` family (granite.cpp) and the Granite 4.0
// hybrid `granitehybrid` (granitehybrid.cpp). Internal to src/model.
#pragma once

#include "model/config.h"
#include "model/metadata.h"

namespace cadenza::model::arch {

// Reads Granite's four multipliers into `c`, each positive and defaulting to plain llama's:
//  - `embedding_scale`   (HF embedding_multiplier) -> c.embedding_scale;
//  - `residual_scale`    (HF residual_multiplier)  -> c.residual_scale (each block's output);
//  - `attention.scale`   (HF attention_multiplier) -> c.attn_scale (replaces 1/sqrt(head_dim));
//  - `logit_scale`       (HF logits_scaling)       -> c.logit_scale = 1 / it.
Status read_granite_multipliers(const MetadataReader& md, ModelConfig& c);

}  // namespace cadenza::model::arch
