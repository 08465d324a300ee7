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
