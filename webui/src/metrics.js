// Reading the Prometheus text format of GET /metrics, and turning a series of scrapes into the
// server view's numbers: rates (tokens/s), ratios (prefix cache hits) and histogram percentiles
// over a window (TTFT, inter-token latency), from the counters' differences between scrapes.

// Parses the exposition text into [{name, labels: {..}, value}].
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3]))) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    const v = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    out.push({ name: m[1], labels, value: v });
  }
  return out;
}

// The sum of a metric's samples whose labels include `match`.
export function sum(samples, name, match = {}) {
  let s = 0, found = false;
  for (const x of samples) {
    if (x.name !== name) continue;
    if (Object.entries(match).some(([k, v]) => x.labels[k] !== v)) continue;
    s += x.value; found = true;
  }
  return found ? s : null;
}

// A histogram's cumulative buckets summed over its series: [[le, count], ...] sorted by le.
export function buckets(samples, name) {
  const by = new Map();
  for (const x of samples) {
    if (x.name !== `${name}_bucket`) continue;
    const le = x.labels.le === '+Inf' ? Infinity : Number(x.labels.le);
    by.set(le, (by.get(le) || 0) + x.value);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]);
}

// The q-quantile (0..1) of the observations between two cumulative bucket lists (older `a`,
// newer `b`), interpolated linearly inside a bucket as Prometheus' histogram_quantile does.
// null when nothing was observed in between.
export function quantileBetween(a, b, q) {
  const prev = new Map(a);
  const diff = b.map(([le, c]) => [le, c - (prev.get(le) || 0)]);
  const total = diff.length ? diff[diff.length - 1][1] : 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [le, c] of diff) {
    if (c >= rank) {
      if (le === Infinity) return lower;
      const inBucket = c - below;
      return inBucket > 0 ? lower + (le - lower) * ((rank - below) / inBucket) : le;
    }
    lower = le; below = c;
  }
  return lower;
}

// Keeps the scrapes of the last `windowS` seconds: {t (s), samples}.
export class History {
  constructor(windowS) { this.windowS = windowS; this.scrapes = []; }
  add(t, samples) {
    this.scrapes.push({ t, samples });
    while (this.scrapes.length > 2 && this.scrapes[0].t < t - this.windowS) this.scrapes.shift();
  }
  latest() { return this.scrapes[this.scrapes.length - 1]; }
  // Per scrape after the first: [t, value] where value = fn(previous, current).
  series(fn) {
    const out = [];
    for (let i = 1; i < this.scrapes.length; i++) out.push([this.scrapes[i].t, fn(this.scrapes[i - 1], this.scrapes[i])]);
    return out;
  }
}

// Rate per second of a counter between two scrapes (0 when it went backwards: a restart).
export function rate(prev, cur, name, match) {
  const a = sum(prev.samples, name, match), b = sum(cur.samples, name, match);
  if (a === null || b === null || cur.t <= prev.t) return null;
  return Math.max(0, (b - a) / (cur.t - prev.t));
}

// The KV tiers behind the prefix cache (host memory, disk: docs/kv-tiers.md) from the
// cadenza_kv_tier_* series, each summed over models: [{tier, blocks, bytes, capacity, hits,
// promotions, demotions, evictions, rejected}] in the order the server lists them. Empty when the
// server runs without tiers.
const TIER_FIELDS = {
  blocks: 'cadenza_kv_tier_blocks', bytes: 'cadenza_kv_tier_bytes',
  capacity: 'cadenza_kv_tier_capacity_bytes', hits: 'cadenza_kv_tier_hits_total',
  promotions: 'cadenza_kv_tier_promotions_total', demotions: 'cadenza_kv_tier_demotions_total',
  evictions: 'cadenza_kv_tier_evictions_total', rejected: 'cadenza_kv_tier_rejected_total',
};
export function kvTiers(samples) {
  const by = new Map();
  for (const x of samples) {
    const tier = x.labels.tier;
    if (tier === undefined || !x.name.startsWith('cadenza_kv_tier_')) continue;
    const field = Object.keys(TIER_FIELDS).find((k) => TIER_FIELDS[k] === x.name);
    if (!field) continue;
    if (!by.has(tier)) by.set(tier, Object.fromEntries([['tier', tier], ...Object.keys(TIER_FIELDS).map((k) => [k, 0])]));
    by.get(tier)[field] += x.value;
  }
  return [...by.values()];
}

// A byte count for people: 0 B, 512 B, 1.5 KiB, 20.0 MiB, 3.25 GiB.
export function bytesText(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[i]}`;
}
