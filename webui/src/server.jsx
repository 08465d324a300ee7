// The server view: polls GET /metrics every POLL_S seconds (and /v1/models) and shows the
// models, running and waiting requests, KV usage, prefix cache hit rate, the KV tiers (memory,
// disk) when the server has them, tokens/s and TTFT / ITL percentiles as charts over the last WINDOW_S seconds. On a gateway (its metrics are
// cadenza_gateway_*): the replicas with their health and load, and requests per tenant.
import { useEffect, useRef, useState } from 'preact/hooks';
import { t } from './i18n.js';
import { getText } from './api.js';
import { History, buckets, bytesText, kvTiers, parseMetrics, quantileBetween, rate, sum } from './metrics.js';
import { Chart } from './chart.jsx';

const POLL_S = 2;
const WINDOW_S = 600;
const PCT_WINDOW_S = 60;  // each percentile point: the observations of the minute before it

const fmt = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v) ? '–' : Number(v).toFixed(digits));

function Stat({ label, value, id }) {
  return <div class="stat" data-testid={id}><div class="value">{value}</div><div class="label">{label}</div></div>;
}

// Percentile series of histogram `name` over the history, each point over the trailing minute.
function percentiles(h, name) {
  const qs = [0.5, 0.9, 0.99];
  const scrapes = h.scrapes;
  const points = qs.map(() => []);
  for (let i = 1; i < scrapes.length; i++) {
    let j = i - 1;
    while (j > 0 && scrapes[j - 1].t >= scrapes[i].t - PCT_WINDOW_S) j--;
    const a = buckets(scrapes[j].samples, name), b = buckets(scrapes[i].samples, name);
    qs.forEach((q, k) => points[k].push([scrapes[i].t, quantileBetween(a, b, q)]));
  }
  return qs.map((q, k) => ({ label: `p${Math.round(q * 100)}`, points: points[k] }));
}

export function ServerView({ models }) {
  const hist = useRef(new History(WINDOW_S));
  const [tick, setTick] = useState(0);
  const [error, setError] = useState('');

  useEffect(() => {
    let alive = true;
    const poll = async () => {
      try {
        const text = await getText('/metrics');
        if (!alive) return;
        hist.current.add(Date.now() / 1000, parseMetrics(text));
        setError('');
      } catch (e) { if (alive) setError(e.message); }
      if (alive) setTick((x) => x + 1);
    };
    poll();
    const id = setInterval(poll, POLL_S * 1000);
    return () => { alive = false; clearInterval(id); };
  }, []);

  const h = hist.current;
  const last = h.latest();
  const s = last ? last.samples : [];
  const gateway = s.some((x) => x.name.startsWith('cadenza_gateway_'));
  return (
    <div class="server" data-tick={tick}>
      {error && <p class="error" role="alert">{t('metricsUnavailable', { e: error })}</p>}
      <section aria-labelledby="models-h">
        <h2 id="models-h">{gateway ? `${t('gateway')} · ${t('models')}` : t('models')}</h2>
        <table class="table" data-testid="models">
          <thead><tr><th>{t('model')}</th><th>{t('status')}</th><th>{t('maxModelLen')}</th></tr></thead>
          <tbody>{models.map((m) => (
            <tr key={m.id}><td>{m.id}</td><td>{m.status || '–'}</td><td>{m.max_model_len || '–'}</td></tr>
          ))}</tbody>
        </table>
      </section>
      {gateway ? <GatewayPanel h={h} s={s} /> : <EnginePanel h={h} s={s} />}
      <p class="hint">{t('lastMinutes', { m: WINDOW_S / 60, s: POLL_S })}</p>
    </div>
  );
}

function EnginePanel({ h, s }) {
  const queries = (p, c) => rate(p, c, 'cadenza_prefix_cache_queries_total');
  const hitSeries = h.series((p, c) => { const q = queries(p, c); return q ? rate(p, c, 'cadenza_prefix_cache_hits_total') / q : null; });
  const hq = sum(s, 'cadenza_prefix_cache_queries_total'), hh = sum(s, 'cadenza_prefix_cache_hits_total');
  const tps = h.series((p, c) => rate(p, c, 'cadenza_generation_tokens_total'));
  const lastTps = tps.length ? tps[tps.length - 1][1] : null;
  return (
    <>
      <section class="stats-grid" aria-label={t('status')}>
        <Stat id="running" label={t('running')} value={fmt(sum(s, 'cadenza_num_requests_running'), 0)} />
        <Stat id="waiting" label={t('waiting')} value={fmt(sum(s, 'cadenza_num_requests_waiting'), 0)} />
        <Stat id="kv" label={t('kvUsage')} value={`${fmt((sum(s, 'cadenza_kv_cache_usage_ratio') ?? 0) * 100, 1)} %`} />
        <Stat id="prefix" label={t('prefixHit')} value={hq ? `${fmt((hh / hq) * 100, 1)} %` : '–'} />
        <Stat id="tps" label={t('tokensPerS')} value={fmt(lastTps, 1)} />
      </section>
      <TierTable h={h} s={s} />
      <section class="charts">
        <Chart title={t('tokensPerS')} series={[{ label: 'tok/s', points: tps }]} />
        <Chart title={`${t('running')} / ${t('waiting')}`} series={[
          { label: t('running'), points: h.scrapes.slice(1).map((x) => [x.t, sum(x.samples, 'cadenza_num_requests_running')]) },
          { label: t('waiting'), points: h.scrapes.slice(1).map((x) => [x.t, sum(x.samples, 'cadenza_num_requests_waiting')]) }]} />
        <Chart title={t('ttftP')} series={percentiles(h, 'cadenza_time_to_first_token_seconds')} />
        <Chart title={t('itlP')} series={percentiles(h, 'cadenza_inter_token_latency_seconds')} />
        <Chart title={`${t('kvUsage')} / ${t('prefixHit')}`} series={[
          { label: 'KV', points: h.scrapes.slice(1).map((x) => [x.t, sum(x.samples, 'cadenza_kv_cache_usage_ratio')]) },
          { label: 'prefix', points: hitSeries }]} />
      </section>
    </>
  );
}

// The prefix cache's tiers below the KV pool (docs/kv-tiers.md): what each holds against its
// budget, and the blocks found there (hits) and moved (promoted back to the pool, demoted from
// the tier above, evicted); hits/s over the last two scrapes. Nothing when the server has none.
function TierTable({ h, s }) {
  const tiers = kvTiers(s);
  if (!tiers.length) return null;
  const last = h.scrapes.length >= 2 ? [h.scrapes[h.scrapes.length - 2], h.scrapes[h.scrapes.length - 1]] : null;
  return (
    <section aria-labelledby="tiers-h">
      <h2 id="tiers-h">{t('kvTiers')}</h2>
      <table class="table" data-testid="kv-tiers">
        <thead><tr><th>{t('tier')}</th><th>{t('blocks')}</th><th>{t('used')}</th><th>{t('capacity')}</th>
          <th>{t('tierHits')}</th><th>{t('hitsPerS')}</th><th>{t('promoted')}</th><th>{t('demoted')}</th><th>{t('evicted')}</th></tr></thead>
        <tbody>{tiers.map((x) => {
          const hps = last ? rate(last[0], last[1], 'cadenza_kv_tier_hits_total', { tier: x.tier }) : null;
          return (
            <tr key={x.tier} data-tier={x.tier}><td>{x.tier}</td><td>{fmt(x.blocks, 0)}</td>
              <td>{bytesText(x.bytes)}{x.capacity > 0 ? ` (${fmt((x.bytes / x.capacity) * 100, 1)} %)` : ''}</td>
              <td>{bytesText(x.capacity)}</td><td>{fmt(x.hits, 0)}</td><td>{fmt(hps, 1)}</td>
              <td>{fmt(x.promotions, 0)}</td><td>{fmt(x.demotions, 0)}</td><td>{fmt(x.evictions, 0)}</td></tr>
          );
        })}</tbody>
      </table>
    </section>
  );
}

function GatewayPanel({ h, s }) {
  const ups = new Map();
  for (const x of s) {
    const u = x.labels.upstream;
    if (!u) continue;
    const e = ups.get(u) || { healthy: null, outstanding: 0, requests: 0 };
    if (x.name === 'cadenza_gateway_upstream_healthy') e.healthy = x.value;
    if (x.name === 'cadenza_gateway_upstream_outstanding') e.outstanding = x.value;
    if (x.name === 'cadenza_gateway_upstream_requests_total') e.requests += x.value;
    ups.set(u, e);
  }
  const tenants = new Map();
  for (const x of s) {
    if (x.name !== 'cadenza_gateway_requests_total' || !x.labels.tenant || x.labels.tenant === '-') continue;
    tenants.set(x.labels.tenant, (tenants.get(x.labels.tenant) || 0) + x.value);
  }
  const reqRate = h.series((p, c) => rate(p, c, 'cadenza_gateway_requests_total'));
  return (
    <>
      <section aria-labelledby="replicas-h">
        <h2 id="replicas-h">{t('replicas')}</h2>
        <table class="table" data-testid="replicas">
          <thead><tr><th>{t('upstream')}</th><th>{t('health')}</th><th>{t('outstanding')}</th><th>{t('requests')}</th></tr></thead>
          <tbody>{[...ups.entries()].sort().map(([u, e]) => (
            <tr key={u} data-upstream={u}><td>{u}</td>
              <td><span class={`badge ${e.healthy === 0 ? 'bad' : 'good'}`}>{e.healthy === 0 ? t('unhealthy') : t('healthy')}</span></td>
              <td>{e.outstanding}</td><td>{e.requests}</td></tr>
          ))}</tbody>
        </table>
      </section>
      {tenants.size > 0 && (
        <section aria-labelledby="tenants-h">
          <h2 id="tenants-h">{t('tenants')}</h2>
          <table class="table" data-testid="tenants">
            <thead><tr><th>{t('tenant')}</th><th>{t('requests')}</th></tr></thead>
            <tbody>{[...tenants.entries()].sort().map(([n, c]) => <tr key={n}><td>{n}</td><td>{c}</td></tr>)}</tbody>
          </table>
        </section>
      )}
      <section class="charts">
        <Chart title={`${t('requests')}/s`} series={[{ label: 'req/s', points: reqRate }]} />
        <Chart title={`${t('requests')} p50/p90/p99 (s)`} series={percentiles(h, 'cadenza_gateway_request_duration_seconds')} />
      </section>
    </>
  );
}
