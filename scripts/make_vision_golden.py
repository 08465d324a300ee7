#!/usr/bin/env python3
"""Writes tests/vision/golden/clip-tiny.json: the reference engine's image embeddings for a
synthesized mmproj and pictures the test makes itself.

  scripts/make_vision_golden.py [--cadenza build/bin/cadenza] [--bin ~/.cache/cadenza-reference/build/bin]

Synthesizes the mmproj with `cadenza synth --mmproj clip-tiny --seed 7` (the recipe the test uses),
writes each picture as a PNG with the formula of tests/vision/image_encode.cpp make_test_image
(the JSON keeps the CRC-32 of its RGB bytes, and the test checks its own picture against it),
and runs the reference engine's llama-mtmd-cli with MTMD_DEBUG_EMBEDDINGS=1, which (with -v) logs the
first and last 16 values of the first image token's embedding and the mean, std, min, max and
sum of all of them. The language model it needs beside the mmproj is
../shared/models/tiny-llama-spm-f16.gguf (embedding width 64, the projector's output); its
greedy text after the image is kept too, for a later end-to-end test. The reference is a black
box: this script only runs it. CADENZA_SHARED_DIR names ../shared where it lies elsewhere.
"""
import argparse, json, os, re, struct, subprocess, sys, tempfile, zlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
shared = os.environ.get("CADENZA_SHARED_DIR") or os.path.join(os.path.dirname(root), "shared")

p = argparse.ArgumentParser()
p.add_argument("--cadenza", default=os.path.join(root, "build/bin/cadenza"))
p.add_argument("--bin", default=os.path.expanduser("~/.cache/cadenza-reference/build/bin"))
a = p.parse_args()

PRESET, SEED = "clip-tiny", 7
IMAGES = [(32, 32, 1), (48, 40, 2)]  # width, height, pattern seed
LM = "models/tiny-llama-spm-f16.gguf"
PROMPT, N_PREDICT = "describe", 8


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
    # Log lines carry a timestamp and level before each value: take the numbers after " I ".
    return [float(v) for v in re.findall(r" I (-?\d+\.\d+(?:e[-+]?\d+)?)", line)]


out = {"mmproj": {"preset": PRESET, "seed": SEED}, "language_model": LM, "prompt": PROMPT,
       "chat_template": "vicuna", "n_predict": N_PREDICT, "images": []}
with tempfile.TemporaryDirectory() as tmp:
    mmproj = os.path.join(tmp, "mmproj.gguf")
    subprocess.run([a.cadenza, "synth", "--mmproj", PRESET, "--seed", str(SEED), "-o", mmproj], check=True)
    for w, h, seed in IMAGES:
        rgb = test_image(w, h, seed)
        path = os.path.join(tmp, f"img{w}x{h}.png")
        open(path, "wb").write(png(w, h, rgb))
        env = dict(os.environ, MTMD_DEBUG_EMBEDDINGS="1")
        r = subprocess.run([os.path.join(a.bin, "llama-mtmd-cli"), "-m", os.path.join(shared, LM),
                            "--mmproj", mmproj, "--image", path, "-p", PROMPT, "-n", str(N_PREDICT),
                            "--temp", "0", "-t", "2", "--chat-template", "vicuna", "--seed", "1", "-v"],
                           env=env, capture_output=True, text=True, timeout=600)
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
        out["images"].append({
            "width": w, "height": h, "seed": seed, "rgb_crc32": zlib.crc32(rgb) & 0xFFFFFFFF,
            "n_embd": int(shape.group(1)), "n_tokens": int(shape.group(2)),
            "token0_first16": floats(find("Token 0 (first 16 values)")),
            "token0_last16": floats(find("Token 0 (last 16 values)")),
            "mean": float(stats.group(1)), "std": float(stats.group(2)), "min": float(stats.group(3)),
            "max": float(stats.group(4)), "sum": float(stats.group(5).rstrip(",")),
            "greedy_text": r.stdout.strip(),
        })
        assert len(out["images"][-1]["token0_first16"]) == 16, out["images"][-1]
dst = os.path.join(root, "tests/vision/golden/clip-tiny.json")
os.makedirs(os.path.dirname(dst), exist_ok=True)
with open(dst, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {dst}", file=sys.stderr)
