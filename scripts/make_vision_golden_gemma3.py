#!/usr/bin/env python3
"""Writes tests/vision/golden/gemma3-tiny.json: what the reference engine computes for a
synthesized Gemma 3 vision model (SigLIP encoder + average-pool projector, and a small gemma3
language model) and pictures the test draws itself.

  scripts/make_vision_golden_gemma3.py [--cadenza build/bin/cadenza] [--bin ~/.cache/cadenza-reference/build/bin]

Synthesizes `cadenza synth --mmproj gemma3-tiny --seed 7` and `cadenza synth --preset gemma3-tiny
--type f16 --seed 11` (the recipe the test uses). For each picture (written as a PNG with the
formula of tests/vision/image_encode.cpp make_test_image; the JSON keeps the CRC-32 of its RGB
bytes):
  - llama-mtmd-cli with MTMD_DEBUG_EMBEDDINGS=1 -v logs the first and last 16 values of the first
    image token's embedding and the mean, std, min, max and sum of all of them;
  - llama-server (--mmproj) answers POST /completion with the raw prompt (its media marker where
    the image goes), temperature -1 (greedy; probabilities a plain softmax of the logits) and
    n_probs: the greedy tokens and, at each of them, the top-k token ids and log-probabilities.
The reference is a black box: this script only runs it.
"""
import argparse, base64, json, os, re, socket, struct, subprocess, sys, tempfile, time, urllib.error, urllib.request, zlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)

p = argparse.ArgumentParser()
p.add_argument("--cadenza", default=os.path.join(root, "build/bin/cadenza"))
p.add_argument("--bin", default=os.path.expanduser("~/.cache/cadenza-reference/build/bin"))
p.add_argument("--out", default=os.path.join(root, "tests/vision/golden/gemma3-tiny.json"))
a = p.parse_args()

MMPROJ, MMPROJ_SEED = "gemma3-tiny", 7
LM, LM_TYPE, LM_SEED = "gemma3-tiny", "f16", 11
IMAGES = [(64, 64, 1), (48, 40, 2)]  # width, height, pattern seed
MARKER = "<__media__>"  # the reference's media marker; the test writes <image> for cadenza run
PROMPT = "<start_of_turn>user\n" + MARKER + "describe<end_of_turn>\n<start_of_turn>model\n"
N_PREDICT, N_PROBS = 8, 8


def test_image(w, h, seed):
    """tests/vision/image_encode.cpp make_test_image, byte for byte."""
    rgb = bytearray()
    for y in range(h):
        for x in range(w):
            rgb += bytes(((x * 255) // max(1, w - 1), (y * 255) // max(1, h - 1),
                          200 if (x // 8 + y // 8 + seed) % 2 else 40))
    return bytes(rgb)


def png(w, h, rgb):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + rgb[y * w * 3:(y + 1) * w * 3] for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def floats(line):
    return [float(v) for v in re.findall(r" I (-?\d+\.\d+(?:e[-+]?\d+)?)", line)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        sys.exit(f"POST {path}: HTTP {e.code}: {e.read().decode(errors='replace')}")


out = {"mmproj": {"preset": MMPROJ, "seed": MMPROJ_SEED},
       "language_model": {"preset": LM, "type": LM_TYPE, "seed": LM_SEED},
       "prompt": PROMPT.replace(MARKER, "<image>"), "n_predict": N_PREDICT, "n_probs": N_PROBS,
       "images": []}
with tempfile.TemporaryDirectory() as tmp:
    mmproj, lm = os.path.join(tmp, "mmproj.gguf"), os.path.join(tmp, "lm.gguf")
    subprocess.run([a.cadenza, "synth", "--mmproj", MMPROJ, "--seed", str(MMPROJ_SEED), "-o", mmproj], check=True)
    subprocess.run([a.cadenza, "synth", "--preset", LM, "--type", LM_TYPE, "--seed", str(LM_SEED), "-o", lm],
                   check=True)
    port = free_port()
    server = subprocess.Popen([os.path.join(a.bin, "llama-server"), "-m", lm, "--mmproj", mmproj, "--port",
                               str(port), "-t", "2", "-c", "512", "-np", "1"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "server.log"), "w"))
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.5)
        else:
            sys.exit("llama-server did not come up:\n" + open(os.path.join(tmp, "server.log")).read()[-3000:])
        # The server's media marker is random per start (GET /props names it).
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=10) as r:
            server_marker = json.loads(r.read())["media_marker"]
        for w, h, seed in IMAGES:
            rgb = test_image(w, h, seed)
            path = os.path.join(tmp, f"img{w}x{h}.png")
            data = png(w, h, rgb)
            open(path, "wb").write(data)
            env = dict(os.environ, MTMD_DEBUG_EMBEDDINGS="1")
            r = subprocess.run([os.path.join(a.bin, "llama-mtmd-cli"), "-m", lm, "--mmproj", mmproj,
                                "--image", path, "-p", "describe", "-n", "1", "--temp", "0", "-t", "2", "--chat-template", "gemma",
                                "--seed", "1", "-v"], env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                sys.exit(f"llama-mtmd-cli failed:\n{r.stderr[-3000:]}")
            lines = r.stderr.splitlines()

            def find(prefix):
                for line in lines:
                    if prefix in line:
                        return line
                sys.exit(f"no '{prefix}' in the reference's log")
            shape = re.search(r"Shape: \[(\d+), (\d+)\]", find("Shape: ["))
            stats = re.search(r"mean=(\S+), std=(\S+), min=(\S+), max=(\S+), sum=(\S+)", find("Stats: mean="))
            c = post(port, "/completion", {
                "prompt": {"prompt_string": PROMPT.replace(MARKER, server_marker), "multimodal_data": [base64.b64encode(data).decode()]},
                "n_predict": N_PREDICT, "n_probs": N_PROBS, "temperature": -1, "seed": 1,
                "cache_prompt": False, "return_tokens": True, "ignore_eos": True})
            steps = [{"id": s["id"], "top": [[t["id"], t["logprob"]] for t in s["top_logprobs"]]}
                     for s in c["completion_probabilities"]]
            out["images"].append({
                "width": w, "height": h, "seed": seed, "rgb_crc32": zlib.crc32(rgb) & 0xFFFFFFFF,
                "n_embd": int(shape.group(1)), "n_tokens": int(shape.group(2)),
                "token0_first16": floats(find("Token 0 (first 16 values)")),
                "token0_last16": floats(find("Token 0 (last 16 values)")),
                "mean": float(stats.group(1)), "std": float(stats.group(2)), "min": float(stats.group(3)),
                "max": float(stats.group(4)), "sum": float(stats.group(5).rstrip(",")),
                "prompt_tokens": c.get("tokens_evaluated"), "greedy": [s["id"] for s in steps],
                "greedy_text": c["content"], "steps": steps,
            })
            assert len(out["images"][-1]["token0_first16"]) == 16, out["images"][-1]
    finally:
        server.terminate()
        server.wait()
os.makedirs(os.path.dirname(a.out), exist_ok=True)
with open(a.out, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {a.out}", file=sys.stderr)
