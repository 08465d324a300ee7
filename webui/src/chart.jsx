// A small line chart (uPlot): `series` = [{label, points: [[t_seconds, value|null], ...]}], all
// on the same times. Redrawn when the data changes; resized with its container.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const colors = ['#2f7dd1', '#d9822b', '#3a9a5b', '#b5485d'];

export function Chart({ title, series, height = 140 }) {
  const box = useRef(null);
  const plot = useRef(null);
  const times = series.length ? series[0].points.map((p) => p[0]) : [];
  const data = [times, ...series.map((s) => s.points.map((p) => (p[1] === null ? null : p[1])))];
  const shape = series.map((s) => s.label).join('|');

  useEffect(() => {
    const el = box.current;
    const opts = {
      width: Math.max(200, el.clientWidth), height,
      legend: { show: true },
      cursor: { show: true, drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [{ stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' } },
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' }, size: 50 }],
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 2, spanGaps: true }))],
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current && plot.current.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.current.destroy(); plot.current = null; };
  }, [shape, height]);

  useEffect(() => { if (plot.current) plot.current.setData(data); });

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={title} />
    </figure>
  );
}
