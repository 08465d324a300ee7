// Unit tests of the server view's arithmetic (webui/src/metrics.js), run by `node --test`:
// the Prometheus text parser, sums over labels, rates and histogram percentiles between scrapes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buckets, bytesText, History, kvTiers, parseMetrics, quantileBetween, rate, sum } from '../../webui/src/metrics.js';

const text = (n) => `# HELP cadenza_time_to_first_token_seconds TTFT
# TYPE cadenza_time_to_first_token_seconds histogram
cadenza_time_to_first_token_seconds_bucket{le="0.1"} ${n[0]}
cadenza_time_to_first_token_seconds_bucket{le="0.5"} ${n[1]}
cadenza_time_to_first_token_seconds_bucket{le="1"} ${n[2]}
cadenza_time_to_first_token_seconds_bucket{le="+Inf"} ${n[3]}
cadenza_generation_tokens_total ${n[4]}
cadenza_request_success_total{finished_reason="stop",model="a \\"q\\""} 3
cadenza_request_success_total{finished_reason="abort",model="b"} 2
`;

test('parses samples, labels with escapes, +Inf', () => {
  const s = parseMetrics(text([1, 2, 3, 4, 10]));
  assert.equal(s.length, 7);
  assert.equal(s[3].labels.le, '+Inf');
  assert.equal(s[5].labels.model, 'a "q"');
  assert.equal(sum(s, 'cadenza_request_success_total'), 5);
  assert.equal(sum(s, 'cadenza_request_success_total', { finished_reason: 'abort' }), 2);
  assert.equal(sum(s, 'absent_metric'), null);
});

test('rate between scrapes, 0 after a counter reset', () => {
  const a = { t: 10, samples: parseMetrics(text([0, 0, 0, 0, 100])) };
  const b = { t: 12, samples: parseMetrics(text([0, 0, 0, 0, 160])) };
  assert.equal(rate(a, b, 'cadenza_generation_tokens_total'), 30);
  assert.equal(rate(b, a, 'cadenza_generation_tokens_total'), null);  // time went backwards
  const reset = { t: 14, samples: parseMetrics(text([0, 0, 0, 0, 5])) };
  assert.equal(rate(b, reset, 'cadenza_generation_tokens_total'), 0);
});

test('percentiles of the observations between two scrapes', () => {
  const name = 'cadenza_time_to_first_token_seconds';
  const a = buckets(parseMetrics(text([10, 10, 10, 10, 0])), name);
  // 10 new observations: 4 in (0.1, 0.5], 6 in (0.5, 1].
  const b = buckets(parseMetrics(text([10, 14, 20, 20, 0])), name);
  assert.equal(quantileBetween(a, b, 0.2), 0.1 + 0.4 * (2 / 4));   // rank 2 of the 4 in (0.1,0.5]
  assert.ok(Math.abs(quantileBetween(a, b, 0.7) - (0.5 + 0.5 * (3 / 6))) < 1e-12);
  assert.equal(quantileBetween(a, a, 0.5), null);  // nothing observed
  // Observations above the last finite bucket: the last finite bound.
  const c = buckets(parseMetrics(text([10, 14, 20, 30, 0])), name);
  assert.equal(quantileBetween(b, c, 0.99), 1);
});

test('history keeps the window', () => {
  const h = new History(60);
  for (let t = 0; t <= 120; t += 10) h.add(t, parseMetrics(text([0, 0, 0, 0, t])));
  assert.ok(h.scrapes[0].t >= 60 - 10);
  assert.equal(h.latest().t, 120);
  const r = h.series((p, c) => rate(p, c, 'cadenza_generation_tokens_total'));
  assert.ok(r.every(([, v]) => v === 1));
});

test('KV tiers: one row per tier, summed over models, in the server\'s order', () => {
  const s = parseMetrics(`cadenza_kv_tier_bytes{model="a",tier="memory"} 1024
cadenza_kv_tier_bytes{model="b",tier="memory"} 2048
cadenza_kv_tier_capacity_bytes{model="a",tier="memory"} 8192
cadenza_kv_tier_blocks{model="a",tier="memory"} 3
cadenza_kv_tier_hits_total{model="a",tier="memory"} 7
cadenza_kv_tier_bytes{tier="disk"} 5
cadenza_kv_tier_evictions_total{tier="disk"} 2
cadenza_kv_cache_usage_ratio 0.5
`);
  const tiers = kvTiers(s);
  assert.deepEqual(tiers.map((x) => x.tier), ['memory', 'disk']);
  assert.equal(tiers[0].bytes, 3072);
  assert.equal(tiers[0].capacity, 8192);
  assert.equal(tiers[0].blocks, 3);
  assert.equal(tiers[0].hits, 7);
  assert.equal(tiers[0].evictions, 0);
  assert.equal(tiers[1].evictions, 2);
  assert.deepEqual(kvTiers(parseMetrics('cadenza_kv_cache_usage_ratio 0\n')), []);
});

test('byte counts for people', () => {
  assert.equal(bytesText(0), '0 B');
  assert.equal(bytesText(512), '512 B');
  assert.equal(bytesText(1536), '1.50 KiB');
  assert.equal(bytesText(20 * 1048576), '20.0 MiB');
  assert.equal(bytesText(3.25 * 1073741824), '3.25 GiB');
  assert.equal(bytesText(null), '–');
});
