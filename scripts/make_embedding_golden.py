#!/usr/bin/env python3
"""Writes an embeddings golden file (tests/server/golden/embed-<name>.json) from the reference
engine's `llama-embedding`, for tests/server/embeddings_golden_test.cpp.

  scripts/make_embedding_golden.py NAME --preset P [--seed S] [--type T] [--layers N]
      [--vocab-from models/X.gguf] [--pooling mean|cls|last] [--cadenza build/bin/cadenza]
      [--reference-bin DIR]

Synthesizes the model with `cadenza synth` (the recipe the test repeats at test time), runs
`llama-embedding` (../shared/tools/reference-engine.sh builds it) on the prompts below with
L2 normalization, and keeps each prompt's token ids (from --verbose-prompt) and its vector. The
reference is a black box: this script only runs it.
"""
import argparse, json, os, re, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
shared = os.environ.get("CADENZA_SHARED_DIR") or os.path.join(os.path.dirname(root), "shared")
PROMPTS = ["hello world", "the quick brown fox jumps over the lazy dog",
           "Embeddings of a synthesized model, compared against the reference engine."]
SEP = "<#sep#>"

p = argparse.ArgumentParser()
p.add_argument("name")
p.add_argument("--preset", required=True)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--type", default="f16")
p.add_argument("--layers", type=int, default=0)
p.add_argument("--vocab-from", default="")
p.add_argument("--pooling", default="")
p.add_argument("--cadenza", default=os.path.join(root, "build/bin/cadenza"))
p.add_argument("--reference-bin", default=os.path.expanduser("~/.cache/cadenza-reference/build/bin"))
a = p.parse_args()

recipe = {"preset": a.preset, "seed": a.seed, "type": a.type}
if a.layers:
    recipe["layers"] = a.layers
if a.vocab_from:
    recipe["vocab_from"] = a.vocab_from
with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "model.gguf")
    cmd = [a.cadenza, "synth", "--preset", a.preset, "-o", model, "--type", a.type,
           "--seed", str(a.seed), "-t", "2"]
    if a.layers:
        cmd += ["--layers", str(a.layers)]
    if a.vocab_from:
        cmd += ["--vocab-from", os.path.join(shared, a.vocab_from)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cmd = [os.path.join(a.reference_bin, "llama-embedding"), "-m", model, "-p", SEP.join(PROMPTS),
           "--embd-separator", SEP, "--embd-output-format", "json", "--embd-normalize", "2",
           "--verbose-prompt", "-t", "2", "-c", "512", "-b", "512", "-ub", "512"]
    if a.pooling:
        cmd += ["--pooling", a.pooling]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode("utf-8", "replace")
# stdout: each prompt's tokens ("   101 -> ' hello'" lines, a blank line between prompts), then
# the JSON document.
start = out.index("\n{") + 1
tokens, current = [], []
for line in out[:start].splitlines():
    m = re.match(r"^\s*(\d+) -> ", line)
    if m:
        current.append(int(m.group(1)))
    elif current:
        tokens.append(current)
        current = []
if current:
    tokens.append(current)
data = json.loads(out[start:])["data"]
assert len(data) == len(PROMPTS) == len(tokens), (len(data), len(tokens))
golden = {"recipe": recipe, "pooling": a.pooling,
          "reference": "llama.cpp (node-llama-cpp 3.21.1) llama-embedding, CPU, 2 threads, --embd-normalize 2",
          "cases": [{"prompt": p_, "tokens": t, "embedding": [round(x, 6) for x in d["embedding"]]}
                    for p_, t, d in zip(PROMPTS, tokens, data)]}
path = os.path.join(root, "tests/server/golden", "embed-" + a.name + ".json")
with open(path, "w") as f:
    json.dump(golden, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(PROMPTS)} cases)", file=sys.stderr)
