#!/usr/bin/env python3
"""Writes a long-context golden file (tests/model/golden/long/<name>.json).

  scripts/make_longctx_golden.py NAME --preset P --chars N [--seed S] [--type T] [--layers L] [--ctx C]
      [--vocab-from models/X.gguf] [--text text/heldout-licenses.txt] [--positions 0.25,0.5,1]
      [--model PATH] [--cadenza build/bin/cadenza] [--server PATH] [-t 2]

Synthesizes the model with `cadenza synth` (the recipe the test synthesizes again at test time;
--model reuses a file already made with the same recipe), starts the reference engine's
llama-server on it (a black box: this script only runs it and reads its HTTP answers), tokenizes
the first N characters of a ../shared text with the reference (/tokenize, special tokens added as
the vocabulary says) and, at each chosen position p (a fraction of the prompt, or an absolute
index when > 1), asks /completion for one token after tokens[0..p] with n_probs 8 at temperature 0:
the reference's top-8 log-probabilities at position p, over the whole vocabulary, from its raw
logits. (refdump, which the short goldens use, stops at its 512-token batch.) A position whose
top token is an incomplete UTF-8 piece gets no probabilities from the server: the next position
is taken instead. The reference runs with flash attention off (--fa off, the default here): its
CPU flash-attention kernel is less precise at long context (on the 4k-token golden it moved its own
log-probabilities by up to 0.043 from position ~2020 on, where ours and its non-flash path agree
to 5e-5 .. 2e-3). Keeps the token count and an FNV-1a hash of the ids (the test checks that its
own tokenizer gives the same), not the ids.
"""
import argparse, json, os, subprocess, sys, tempfile, time, urllib.request

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
shared = os.environ.get("CADENZA_SHARED_DIR") or os.path.join(os.path.dirname(root), "shared")

p = argparse.ArgumentParser()
p.add_argument("name")
p.add_argument("--preset", required=True)
p.add_argument("--chars", type=int, required=True)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--type", default="f16")
p.add_argument("--layers", type=int, default=0)
p.add_argument("--ctx", type=int, default=0,
               help="the context length the file declares (engines refuse prompts past it)")
p.add_argument("--vocab-from", default="models/tiny-qwen2-f16.gguf")
p.add_argument("--text", default="text/heldout-licenses.txt")
p.add_argument("--positions", default="0.25,0.5,0.75,1")
p.add_argument("--ci", action="store_true", help="the ctest run checks this file (else: scripts/longctx_check.sh)")
p.add_argument("--model", default="")
p.add_argument("--cadenza", default=os.path.join(root, "build/bin/cadenza"))
p.add_argument("--server", default=os.path.expanduser("~/.cache/cadenza-reference/build/bin/llama-server"))
p.add_argument("--port", type=int, default=18931)
p.add_argument("-t", "--threads", type=int, default=2)
p.add_argument("--fa", default="off", choices=["on", "off", "auto"], help="the reference's flash attention")
a = p.parse_args()

recipe = {"preset": a.preset, "seed": a.seed, "type": a.type, "vocab_from": a.vocab_from}
if a.layers:
    recipe["layers"] = a.layers
if a.ctx:
    recipe["ctx"] = a.ctx
text = open(os.path.join(shared, a.text), encoding="utf-8").read()[: a.chars]


def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{a.port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def fnv1a(ids):
    h = 0xcbf29ce484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little", signed=True):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


with tempfile.TemporaryDirectory() as tmp:
    model = a.model
    if not model:
        model = os.path.join(tmp, "model.gguf")
        cmd = [a.cadenza, "synth", "--preset", a.preset, "-o", model, "--type", a.type, "--seed",
               str(a.seed), "--vocab-from", os.path.join(shared, a.vocab_from), "-t", str(a.threads)]
        if a.layers:
            cmd += ["--layers", str(a.layers)]
        if a.ctx:
            cmd += ["--ctx", str(a.ctx)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = a.chars + 64  # at least one token per character
    srv = subprocess.Popen([a.server, "-m", model, "-t", str(a.threads), "-c", str(ctx), "-np", "1",
                            "--port", str(a.port), "-fa", a.fa], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{a.port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            time.sleep(1)
        ids = post("/tokenize", {"content": text, "add_special": True})["tokens"]
        n = len(ids)
        wanted = []
        for f in a.positions.split(","):
            x = float(f)
            wanted.append(int(x) if x > 1 else max(0, min(n - 1, round(x * n) - 1)))
        positions = []
        for pos in sorted(set(wanted)):
            for q in range(pos, min(n, pos + 16)):
                t0 = time.time()
                r = post("/completion", {"prompt": ids[: q + 1], "n_predict": 1, "n_probs": 8,
                                         "temperature": 0, "cache_prompt": True})
                probs = r.get("completion_probabilities")
                print(f"position {q}: {'ok' if probs else 'no probabilities (incomplete UTF-8)'} "
                      f"({time.time() - t0:.1f} s)", file=sys.stderr)
                if probs:
                    top = [[t["id"], round(t["logprob"], 5)] for t in probs[0]["top_logprobs"]]
                    positions.append({"position": q, "top_logprobs": top})
                    break
    finally:
        srv.terminate()
        srv.wait()

golden = {"recipe": recipe, "text": {"file": a.text, "chars": a.chars}, "ci": a.ci,
          "n_tokens": n, "tokens_fnv1a": fnv1a(ids),
          "reference": f"llama.cpp (node-llama-cpp 3.21.1) llama-server -fa {a.fa} /completion n_probs 8, CPU, {a.threads} threads, f16 KV",
          "positions": positions}
os.makedirs(os.path.join(root, "tests/model/golden/long"), exist_ok=True)
path = os.path.join(root, "tests/model/golden/long", a.name + ".json")
with open(path, "w") as f:
    json.dump(golden, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {path} ({os.path.getsize(path)} bytes, {n} tokens, {len(positions)} positions)", file=sys.stderr)
