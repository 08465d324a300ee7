#!/usr/bin/env python3
"""Writes cadenza.json, the Grafana dashboard for Cadenza, from the panel list below.

  deploy/monitoring/grafana/make_dashboard.py           # rewrite cadenza.json
  deploy/monitoring/grafana/make_dashboard.py --check   # exit 1 if cadenza.json is stale

Edit the list here, not the JSON. Every query either reads a recording rule of
../rules/cadenza-recording.yaml or a raw cadenza_* / process_* metric; tests/ops/live_prometheus.py
runs each one against a real Prometheus scraping a real `cadenza serve` and `cadenza gateway` and
fails if any returns no series. `$__rate_interval` is Grafana's; the live test substitutes 1m.
"""
import json, os, sys

RI = "$__rate_interval"
SERVE = 'job=~"$serve_job"'
GW = 'job=~"$gateway_job"'

# (row title, [(panel title, unit, [(legend, expr)], description)])
ROWS = [
    ("Latency (replicas)", [
        ("Time to first token", "s", [
            ("p50", "job:cadenza_time_to_first_token_seconds:p50_5m{%s}" % SERVE),
            ("p95", "job:cadenza_time_to_first_token_seconds:p95_5m{%s}" % SERVE),
            ("p99", "job:cadenza_time_to_first_token_seconds:p99_5m{%s}" % SERVE)],
         "From the request's arrival to its first generated token (queue + prefill)."),
        ("Inter-token latency", "s", [
            ("p50", "job:cadenza_inter_token_latency_seconds:p50_5m{%s}" % SERVE),
            ("p95", "job:cadenza_inter_token_latency_seconds:p95_5m{%s}" % SERVE),
            ("p99", "job:cadenza_inter_token_latency_seconds:p99_5m{%s}" % SERVE)],
         "Time between consecutive tokens of a stream."),
        ("End-to-end latency", "s", [
            ("p50", "job:cadenza_e2e_request_latency_seconds:p50_5m{%s}" % SERVE),
            ("p95", "job:cadenza_e2e_request_latency_seconds:p95_5m{%s}" % SERVE),
            ("p99", "job:cadenza_e2e_request_latency_seconds:p99_5m{%s}" % SERVE)],
         "From submission to the last token."),
        ("Queue time p95", "s", [
            ("p95", "histogram_quantile(0.95, sum by (le) (rate(cadenza_request_queue_time_seconds_bucket{%s}[%s])))" % (SERVE, RI))],
         "Time from arrival to the first schedule."),
    ]),
    ("Throughput and load", [
        ("Tokens per second", "short", [
            ("generated", "sum(job:cadenza_generation_tokens:rate1m{%s})" % SERVE),
            ("prompt", "sum(job:cadenza_prompt_tokens:rate1m{%s})" % SERVE)],
         "Tokens of finished requests per second, all replicas."),
        ("Requests running and waiting", "short", [
            ("running {{instance}}", "cadenza_num_requests_running{%s}" % SERVE),
            ("waiting {{instance}}", "cadenza_num_requests_waiting{%s}" % SERVE)],
         "Waiting requests are what the autoscaler scales on."),
        ("Finished requests by reason", "reqps", [
            ("{{finished_reason}}", "sum by (finished_reason) (rate(cadenza_request_success_total{%s}[%s]))" % (SERVE, RI))],
         "stop, length, abort (client went away) and error."),
        ("HTTP responses by status", "reqps", [
            ("{{route}} {{status}}", "sum by (route, status) (rate(cadenza_http_requests_total{%s}[%s]))" % (SERVE, RI))],
         "Every route of cadenza serve, by HTTP status."),
    ]),
    ("Memory and cache", [
        ("KV cache usage", "percentunit", [
            ("{{instance}}", "cadenza_kv_cache_usage_ratio{%s}" % SERVE)],
         "Share of KV blocks in use. Near 1, requests wait and running ones get preempted."),
        ("Preemptions", "short", [
            ("{{instance}}", "rate(cadenza_num_preemptions_total{%s}[%s])" % (SERVE, RI))],
         "Requests whose KV was dropped for recompute, per second."),
        ("Prefix-cache hit rate", "percentunit", [
            ("{{job}}", "job:cadenza_prefix_cache_hit:ratio_rate5m{%s}" % SERVE)],
         "Lookups that found at least one cached block."),
        ("Resident memory", "bytes", [
            ("{{job}} {{instance}}", 'process_resident_memory_bytes{job=~"$serve_job|$gateway_job"}')],
         "Process RSS of every replica and gateway."),
        ("Open file descriptors", "short", [
            ("{{job}} {{instance}}", 'process_open_fds{job=~"$serve_job|$gateway_job"}')],
         "Grows without bound when connections leak."),
        ("MoE expert load imbalance", "short", [
            ("layer {{layer}}", "job_layer:cadenza_moe_expert_tokens:imbalance_rate5m{%s}" % SERVE)],
         "Busiest expert's tokens over the mean expert's, per layer (1 = even). MoE models only."),
        ("MoE tokens per expert (top 10)", "short", [
            ("layer {{layer}} expert {{expert}}", "topk(10, sum by (layer, expert) (rate(cadenza_moe_expert_tokens_total{%s}[%s])))" % (SERVE, RI))],
         "The ten busiest experts. MoE models only."),
    ]),
    ("Gateway", [
        ("Requests per tenant", "reqps", [
            ("{{tenant}}", "sum by (tenant) (tenant:cadenza_gateway_requests:rate1m{%s})" % GW)],
         "Client requests per second by tenant."),
        ("Client errors and refusals", "reqps", [
            ("{{status}}", 'sum by (status) (rate(cadenza_gateway_requests_total{%s,status!~"2.."}[%s]))' % (GW, RI)),
            ("5xx share", "job:cadenza_gateway_server_errors:ratio_rate5m{%s}" % GW)],
         "Non-2xx answers (401 bad key, 404 unknown model, 429 limits, 5xx failures)."),
        ("Rate-limited requests", "reqps", [
            ("{{tenant}} {{limit}}", "sum by (tenant, limit) (rate(cadenza_gateway_rate_limited_total{%s}[%s]))" % (GW, RI))],
         "429s by tenant and by the limit hit (requests or tokens)."),
        ("Response cache", "reqps", [
            ("hits", "sum(rate(cadenza_gateway_cache_hits_total{%s}[%s]))" % (GW, RI)),
            ("misses", "sum(rate(cadenza_gateway_cache_misses_total{%s}[%s]))" % (GW, RI)),
            ("stores", "sum(rate(cadenza_gateway_cache_stores_total{%s}[%s]))" % (GW, RI))],
         "The gateway's response cache."),
        ("Replica health", "short", [
            ("{{upstream}}", "cadenza_gateway_upstream_healthy{%s}" % GW),
            ("healthy replicas", "job:cadenza_gateway_upstreams_healthy:sum{%s}" % GW),
            ("scrape up {{instance}}", 'up{job=~"$serve_job|$gateway_job"}')],
         "1 = the gateway's last /ready check passed; up = Prometheus reaches the process."),
        ("Replica load and latency", "s", [
            ("in flight {{upstream}}", "cadenza_gateway_upstream_outstanding{%s}" % GW),
            ("p95 {{upstream}}", "histogram_quantile(0.95, sum by (upstream, le) (rate(cadenza_gateway_upstream_latency_seconds_bucket{%s}[%s])))" % (GW, RI))],
         "Requests in flight per replica, and time to each replica's response header."),
        ("Failover", "short", [
            ("retries {{upstream}}", "sum by (upstream) (increase(cadenza_gateway_retries_total{%s}[%s]))" % (GW, RI)),
            ("ejections {{upstream}}", "sum by (upstream) (increase(cadenza_gateway_upstream_ejections_total{%s}[%s]))" % (GW, RI)),
            ("broken streams {{upstream}}", "sum by (upstream) (increase(cadenza_gateway_stream_errors_total{%s}[%s]))" % (GW, RI))],
         "Retries on another replica, circuit breakers opened, streams that ended in an error event."),
        ("Gateway request duration p99", "s", [
            ("p99", "job:cadenza_gateway_request_duration_seconds:p99_5m{%s}" % GW)],
         "Client request duration at the gateway, to the last byte."),
    ]),
]


def dashboard():
    panels, y, pid = [], 0, 1
    for title, row in ROWS:
        panels.append({"type": "row", "title": title, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid += 1
        y += 1
        for i, (ptitle, unit, queries, desc) in enumerate(row):
            panels.append({
                "type": "timeseries", "title": ptitle, "id": pid, "description": desc,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                            "tooltip": {"mode": "multi"}},
                "targets": [{"refId": chr(ord("A") + k), "expr": expr, "legendFormat": legend,
                             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                            for k, (legend, expr) in enumerate(queries)],
            })
            pid += 1
        y += ((len(row) + 2) // 3) * 8
    var = lambda name, label, default: {
        "name": name, "label": label, "type": "custom", "query": default,
        "current": {"text": default, "value": default}, "hide": 0,
        "options": [{"text": default, "value": default, "selected": True}]}
    return {
        "title": "Cadenza", "uid": "cadenza-overview", "tags": ["cadenza", "llm"],
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"}, "timezone": "",
        "description": "Cadenza replicas (cadenza serve) and gateways: latency, throughput, memory, cache, MoE load, tenants and replica health. Generated by make_dashboard.py.",
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus", "hide": 0, "current": {}},
            var("serve_job", "Replica job (regex)", "cadenza-serve.*"),
            var("gateway_job", "Gateway job (regex)", "cadenza-gateway.*"),
        ]},
        "panels": panels,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "cadenza.json")
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv:
        if open(path).read() != text:
            print(f"{path} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    open(path, "w").write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
