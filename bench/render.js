'use strict';

// Turns the figures of a bench run (bench/results.json) into the markdown report and the SVG
// chart. `node bench/render.js` re-renders bench/results.md and bench/results.svg from
// bench/results.json without running anything.

const fs = require('node:fs');
const path = require('node:path');
const { byId } = require('./rows');
const { HISTOGRAM_MS } = require('./workloads');

// ---- Statistics over runs ----------------------------------------------------------------------

function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

function spread(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (v.length === 0) return null;
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
}

// The rows of a workload that ran, in the workload's order.
function rowIds(entry) {
  return entry.workload.rows.filter((id) => entry.runs.some((run) => run[id]));
}

// The rows of clients, without the ceiling rows (references, see rows.js): what the summary and
// the chart compare.
function clientIds(entry) {
  return rowIds(entry).filter((id) => !byId.get(id)?.ceiling);
}

// One figure of a row over the runs of a workload (runs that failed to report left out).
function values(entry, rowId, field) {
  return entry.runs.map((run) => run[rowId]).filter((r) => r && !r.error).map((r) => r[field]);
}

// rps of `rowId` divided by rps of `baseId`, paired run by run.
function ratios(entry, rowId, baseId, field = 'rps') {
  const out = [];
  for (const run of entry.runs) {
    const a = run[rowId];
    const b = run[baseId];
    if (a && b && !a.error && !b.error && a[field] > 0 && b[field] > 0) out.push(a[field] / b[field]);
  }
  return out;
}

function errorsOf(entry, rowId) {
  const out = [];
  for (const run of entry.runs) {
    const r = run[rowId];
    if (!r) continue;
    if (r.error) out.push(r.error);
    else if (r.failures) out.push(`${r.failures} failed: ${r.firstError}`);
  }
  return out;
}

// ---- Formatting --------------------------------------------------------------------------------

const int = (v) => (v === null || v === undefined ? '–' : Math.round(v).toLocaleString('en-US'));
const fixed = (digits) => (v) => (v === null || v === undefined ? '–' : v.toFixed(digits));
const ms = (v) => (v === null ? '–' : v < 10 ? v.toFixed(2) : v.toFixed(1));
const x = (v) => (v === null ? '–' : `${v.toFixed(2)}×`);
const mib = (bytes) => (bytes === null ? '–' : (bytes / 1048576).toFixed(1));

// "median (min–max)" over runs, or the value alone for one run or when all runs agree.
function range(s, fmt) {
  if (s === null) return '–';
  if (s.n === 1 || fmt(s.min) === fmt(s.max)) return fmt(s.median);
  return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
}

function label(rowId) {
  return byId.get(rowId)?.label ?? rowId;
}

// A row's label as a table shows it: hyperagent's rows in bold.
function name(rowId) {
  return rowId.startsWith('hyperagent') ? `**${label(rowId)}**` : label(rowId);
}

// The row a workload's ratios are taken against (Node's keep-alive agent of its protocol).
function baseOf(entry, fallback) {
  return entry.workload.baseline ?? fallback;
}

function table(head, rows) {
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const r of rows) lines.push(`| ${r.join(' | ')} |`);
  return lines.join('\n') + '\n';
}

function failedCell(entry, rowId) {
  const total = values(entry, rowId, 'failures').reduce((a, b) => a + (b || 0), 0);
  const crashed = entry.runs.filter((run) => run[rowId]?.error).length;
  return crashed ? `${total} + ${crashed} run(s) crashed` : String(total);
}

function footnotes(entries) {
  const failures = [];
  const disturbed = [];
  for (const entry of entries) {
    for (const id of rowIds(entry)) {
      const errs = [...new Set(errorsOf(entry, id))];
      if (errs.length) failures.push(`- ${entry.workload.title}, ${label(id)}: ${errs.join('; ')}`);
      const retried = entry.runs.flatMap((run) => run[id]?.failedAttempts ?? []);
      if (retried.length) {
        failures.push(`- ${entry.workload.title}, ${label(id)}, attempts run again: ${[...new Set(retried)].join('; ')}`);
      }
      const shares = entry.runs.map((run) => run[id]).filter((r) => r?.disturbed).map((r) => pct(r.foreignCpu));
      if (shares.length) disturbed.push(`- ${entry.workload.title}, ${label(id)}: ${shares.join(', ')} of a core`);
    }
  }
  let out = '';
  if (failures.length) out += `\nFailures:\n${failures.join('\n')}\n`;
  if (disturbed.length) {
    out += '\nDisturbed runs kept (other processes used this much of a core during the least disturbed attempt):\n' +
      `${disturbed.join('\n')}\n`;
  }
  return out;
}

const pct = (v) => `${Math.round(v * 100)}%`;

// ---- Sections ----------------------------------------------------------------------------------

// The column of ratios: against Node's keep-alive agent, or the workload's own baseline.
function ratioHead(entry, baseline) {
  const base = baseOf(entry, baseline);
  return base === 'node-ka' || base === 'node-https-ka' ? '× Node keep-alive' : `× ${label(base)}`;
}

function loadTable(entry, baseline) {
  const head = ['client', 'req/s', ratioHead(entry, baseline), 'p50 ms', 'p99 ms', 'sockets', 'JS CPU µs/req',
    'JS thread CPU µs/req', 'CPU µs/req', 'peak RSS MiB', 'failed'];
  const rows = rowIds(entry).map((id) => [
    name(id),
    range(spread(values(entry, id, 'rps')), int),
    range(spread(ratios(entry, id, baseOf(entry, baseline))), x),
    ms(median(values(entry, id, 'p50'))),
    ms(median(values(entry, id, 'p99'))),
    range(spread(values(entry, id, 'accepted')), int),
    fixed(1)(median(values(entry, id, 'jsCpuUs'))),
    fixed(1)(median(values(entry, id, 'mainCpuUs'))),
    fixed(1)(median(values(entry, id, 'cpuUs'))),
    fixed(0)(median(values(entry, id, 'maxRssMiB'))),
    failedCell(entry, id),
  ]);
  return table(head, rows);
}

function describeLoad(w) {
  const sent = w.requestBytes ?? (w.requestBody === undefined ? 0 : Buffer.byteLength(w.requestBody));
  const body = sent ? `, ${int(sent)} B request body` : '';
  const headers = w.headers ? `, headers ${Object.keys(w.headers).map((h) => `\`${h}\``).join(', ')}` : '';
  const shape = w.perCaller
    ? `${w.concurrency} callers × ${int(w.perCaller)} requests`
    : w.durationMs
      ? `${w.concurrency} in flight, measured for ${w.durationMs / 1000} s`
      : `${int(w.requests)} requests, ${w.concurrency} in flight`;
  const warm = w.warmupMs ? `, after ${int(w.warmupMs)} ms of unmeasured warm-up` : ', no warm-up';
  const conns = w.group === 'h2'
    ? 'HTTP/2 over TLS, each client with the connections it opens itself (see *sockets*)'
    : `${w.connections} connections`;
  return `\`${w.method} ${w.path}\`${body}${headers}; ${shape}, ${conns}${warm}.`;
}

// The memory of `streamMemory` open streams (requests in flight) of an HTTP/2 workload's rows.
function streamMemoryTable(entry) {
  const w = entry.workload;
  const missed = [];
  const rows = rowIds(entry).map((id) => {
    const errs = [...new Set(entry.runs.map((run) => run[id]?.streamMemoryError).filter(Boolean))];
    if (errs.length) missed.push(`- ${label(id)}: not measured in ${errs.length} run(s): ${errs.join('; ')}`);
    return [
      name(id),
      mib(median(values(entry, id, 'idleRss'))),
      mib(median(values(entry, id, 'streamsRss'))),
      range(spread(values(entry, id, 'rssPerStream').map((b) => b / 1024)), fixed(1)),
      range(spread(values(entry, id, 'heapPerStream')), int),
    ];
  });
  return `Memory of ${int(w.streamMemory)} open streams: in each client's fresh process, before the warm-up, ` +
    `the memory after a forced GC with ${int(w.streamMemory)} requests in flight (\`GET /park\`, held by the ` +
    `server until it has them all and the client has measured), against the same process with its ` +
    `connection open and idle just before; divided by ${int(w.streamMemory)}. *RSS* includes native memory ` +
    `(hyperagent's sessions live in Rust); *JS heap* is V8's \`heapUsed\`. One measurement per run ` +
    `(medians, min–max): RSS moves in pages and with the allocator, so small figures are coarse.\n\n` +
    table(['client', 'idle RSS MiB', `RSS with ${int(w.streamMemory)} open MiB`, 'RSS KiB/stream',
      'JS heap B/stream'], rows) + (missed.length ? `\n${missed.join('\n')}\n` : '');
}

const CHARTED = new Set(['throughput', 'akb', 'https', 'h2']);

function summaryTable(entries, baseline) {
  const ids = [...new Set(entries.flatMap(clientIds))];
  const head = ['client', ...entries.map((e) => shortTitle(e.workload))];
  const rows = ids.map((id) => [
    name(id),
    ...entries.map((e) => range(spread(ratios(e, id, baseOf(e, baseline))), x)),
  ]);
  const base = baseOf(entries[0], baseline);
  rows.push([
    `*${label(base)}, req/s*`,
    ...entries.map((e) => `*${int(median(values(e, baseOf(e, baseline), 'rps')))}*`),
  ]);
  return table(head, rows);
}

function summary(entries, baseline) {
  const http = entries.filter((e) => e.workload.group === 'throughput' || e.workload.group === 'akb');
  const https = entries.filter((e) => e.workload.group === 'https');
  const h2 = entries.filter((e) => e.workload.group === 'h2');
  if (http.length === 0 && https.length === 0 && h2.length === 0) return '';
  let out = `## Summary: requests per second relative to Node's keep-alive agent

` +
    `Median of the per-run ratios (min–max), each run paired with Node's keep-alive agent ` +
    `(\`http.Agent\` or \`https.Agent\` with \`keepAlive: true\`) in the same round` +
    (h2.length ? ` (for HTTP/2, with ${label(baseOf(h2[0], baseline))})` : '') + '. Above 1 is faster.\n\n';
  if (http.length) out += `### HTTP\n\n${summaryTable(http, baseline)}\n`;
  if (https.length) out += `### HTTPS\n\n${summaryTable(https, baseline)}\n`;
  if (h2.length) {
    out += `### HTTP/2 (× ${label(baseOf(h2[0], baseline))})\n\n${summaryTable(h2, baseline)}\n`;
  }
  return out + '![ratios](results.svg)\n';
}

function shortTitle(w) {
  return {
    hello: 'hello', '64k': '64 KiB resp.', '1m': '1 MiB resp.', 'post-64k': '64 KiB POST',
    api: 'JSON API call',
    akb: 'agentkeepalive scenario', 'https-hello': 'hello', 'https-64k': '64 KiB resp.',
    'https-handshake': 'handshakes (close)',
    'h2-hello': 'hello, 50 in flight', 'h2-hello-500': 'hello, 500 in flight',
    'h2-64k': '64 KiB resp., 50 in flight', 'h2-64k-500': '64 KiB resp., 500 in flight',
  }[w.id] ?? w.id;
}

function akbSection(entry, baseline) {
  const w = entry.workload;
  const bounds = [...(w.histogram ?? HISTOGRAM_MS).map((b) => `<${b}`), `>=${(w.histogram ?? HISTOGRAM_MS).at(-1)}`];
  const hist = rowIds(entry).map((id) => {
    const counts = new Array(bounds.length).fill(0);
    for (const h of values(entry, id, 'histogram')) h?.forEach((c, i) => (counts[i] += c));
    const total = counts.reduce((a, b) => a + b, 0);
    const agent = spread(values(entry, id, 'socketsCreated'));
    return [
      name(id),
      agent === null ? 'n/a' : range(agent, int),
      range(spread(values(entry, id, 'accepted')), int),
      failedCell(entry, id),
      ...counts.map((c) => (total ? `${((100 * c) / total).toFixed(1)}%` : '–')),
    ];
  });
  return `## ${w.title}\n\n${describeLoad(w)} The scenario of agentkeepalive's own benchmark: ` +
    `its figures are the sockets created (by the agent's own count, and as the server accepted them) ` +
    `and how many requests finished under each latency bound, over all runs.\n\n` +
    loadTable(entry, baseline) + '\n' +
    table(['client', 'sockets created (agent)', 'accepted by server', 'failed', ...bounds], hist) +
    footnotes([entry]);
}

function keepAliveSection(entries) {
  const head = ['client', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'sockets', 'failed'];
  let out = `## Keep-alive server against \`Connection: close\` server\n\n` +
    `The same clients against a server that keeps connections alive and one that closes every ` +
    `connection after its response. Keep-alive must win big where the server allows it, and no ` +
    `request may fail where it does not.\n`;
  for (const entry of entries) {
    const w = entry.workload;
    const rows = rowIds(entry).map((id) => [
      name(id),
      range(spread(values(entry, id, 'rps')), int),
      ...['p50', 'p90', 'p99', 'max'].map((f) => ms(median(values(entry, id, f)))),
      range(spread(values(entry, id, 'accepted')), int),
      failedCell(entry, id),
    ]);
    out += `\n### ${w.title}\n\n${describeLoad(w)}\n\n${table(head, rows)}`;
  }
  return out + footnotes(entries);
}

// What an active AsyncLocalStorage costs each client: the hello workload against the same
// workload with every request inside als.run(), both of this run (not paired round by round).
function contextSection(entry, plain) {
  const w = entry.workload;
  const rows = rowIds(entry).map((id) => {
    const base = plain ? median(values(plain, id, 'rps')) : null;
    const withAls = median(values(entry, id, 'rps'));
    return [
      name(id),
      int(base),
      int(withAls),
      base > 0 && withAls !== null ? x(withAls / base) : '–',
      fixed(1)(plain ? median(values(plain, id, 'mainCpuUs')) : null),
      fixed(1)(median(values(entry, id, 'mainCpuUs'))),
      failedCell(entry, id),
    ];
  });
  return `## Async context: ${w.title}\n\n${describeLoad(w)} Each request runs inside ` +
    '`AsyncLocalStorage.run()` with a store of its own, and fails if the store is not its own ' +
    'again once the response has been read. Compared with the hello workload of the same run ' +
    '(medians; not paired round by round).\n\n' +
    table(['client', 'req/s', 'req/s in als.run()', '× without', 'JS thread CPU µs/req',
      'in als.run()', 'failed'], rows) + footnotes([entry]);
}

function idleSection(entry, baseline) {
  const w = entry.workload;
  const base = median(values(entry, baseline, 'rssAdded'));
  const baseHeap = median(values(entry, baseline, 'heapAdded'));
  const rows = rowIds(entry).map((id) => {
    const rss = median(values(entry, id, 'rssAdded'));
    const heap = median(values(entry, id, 'heapAdded'));
    const held = median(values(entry, id, 'held'));
    const open = median(values(entry, id, 'serverOpen'));
    return [
      name(id),
      `${held === null ? 'n/a' : int(held)} / ${int(open)}`,
      range(spread(values(entry, id, 'rssAdded').map((b) => b / 1048576)), fixed(1)),
      fixed(1)(median(values(entry, id, 'rssPerConn')) / 1024),
      range(spread(values(entry, id, 'heapAdded').map((b) => b / 1048576)), fixed(1)),
      int(median(values(entry, id, 'heapPerConn'))),
      base > 0 && rss !== null ? x(rss / base) : '–',
      baseHeap > 0 && heap !== null ? x(heap / baseHeap) : '–',
      failedCell(entry, id),
    ];
  });
  return `## Idle footprint: ${w.title}\n\n` +
    `Memory a client process gains by holding ${int(w.connections)} idle keep-alive connections to one ` +
    `origin, measured after a forced GC once they are idle, against the same process just before it ` +
    `opened them. The server holds every request until all ${int(w.connections)} are in flight, so each ` +
    `gets its own connection. A first client of the same row opened and closed as many connections ` +
    `before the base measurement, so that what the burst itself leaves behind (a grown young ` +
    `generation, allocator caches) is in the base and the difference is what holding costs. RSS ` +
    `includes native memory (hyperagent's pool lives in Rust); *JS heap* is V8's \`heapUsed\`.\n\n` +
    table(['client', 'idle held (client / server)', 'RSS added MiB', 'RSS KiB/conn', 'JS heap added MiB',
      'heap B/conn', 'RSS × Node', 'heap × Node', 'failed'], rows) + footnotes([entry]);
}

function scaleSection(entries, micro, baseline) {
  let out = '## Scale\n\n';
  if (entries.length) {
    const ids = [...new Set(entries.flatMap(rowIds))];
    const head = ['client', ...entries.map((e) => `${int(e.workload.concurrencyLevel)} in flight`)];
    const rows = ids.map((id) => [
      name(id),
      ...entries.map((e) => {
        const rps = median(values(e, id, 'rps'));
        if (rps === null) return '–';
        const r = id === baseline ? '' : ` (${x(median(ratios(e, id, baseline)))})`;
        return `${int(rps)}${r}`;
      }),
    ]);
    out += `Requests per second (median; × Node's keep-alive agent, paired) as concurrency grows, ` +
      `GET /hello with as many connections as requests in flight.\n\n${table(head, rows)}` +
      footnotes(entries) + '\n';
  }
  if (micro) {
    out += '### Pool micro-benchmark\n\n' +
      'One checkout of an idle connection plus its release, in `src/pool` (Rust, no I/O), ' +
      'median of 5 samples of 1,000,000 operations, origins visited in a scattered order ' +
      '(`cargo test --release --lib pool::scale_bench -- --ignored --nocapture`).\n\n';
    if (micro.rows.length) {
      const base = micro.rows.find((r) => r.origins === 1 && r.idlePerOrigin <= 10)?.nsPerOp ?? micro.rows[0].nsPerOp;
      out += table(['origins × idle connections each', 'idle in the pool', 'ns per checkout + release', '× 1 origin × 10'],
        micro.rows.map((r) => [`${int(r.origins)} × ${int(r.idlePerOrigin)}`, int(r.idleTotal),
          r.nsPerOp.toFixed(1), x(r.nsPerOp / base)]));
    }
    if (micro.error) out += `\nThe micro-benchmark did not complete: ${micro.error}.\n`;
  }
  return out;
}

// A ratio target: `row` against `base` on `entry`, met at `atLeast` or more.
function ratioTarget(entry, text, row, base, atLeast) {
  const r = entry ? median(ratios(entry, row, base)) : null;
  return [text, x(r), r === null ? 'not measured' : r >= atLeast ? 'met' : '**missed**'];
}

function targetsSection(byWorkload, baseline) {
  const rows = [];
  const verdict = (ok) => (ok === null ? 'not measured' : ok ? 'met' : '**missed**');
  const hello = byWorkload.hello;
  const httpsHello = byWorkload['https-hello'];
  rows.push(ratioTarget(hello, 'drop-in `Agent`, HTTP hello ≥ 1.2× Node\'s keep-alive agent', 'hyperagent', baseline, 1.2));
  rows.push(ratioTarget(hello, 'drop-in `Agent`, HTTP hello ≥ 1.5× agentkeepalive', 'hyperagent', 'agentkeepalive', 1.5));
  rows.push(ratioTarget(httpsHello, 'drop-in `HttpsAgent`, HTTPS hello ≥ 2× Node\'s HTTPS keep-alive agent',
    'hyperagent-https', 'node-https-ka', 2));
  rows.push(ratioTarget(hello, '`agent.request()`, HTTP hello ≥ 1.5× undici `Pool.request`', 'hyperagent-request', 'undici-pool', 1.5));
  rows.push(ratioTarget(httpsHello, '`agent.request()`, HTTPS hello ≥ 2× undici `Pool.request`',
    'hyperagent-https-request', 'undici-pool-https', 2));
  rows.push(ratioTarget(hello, '`fetch` with the `Dispatcher`, HTTP hello ≥ 1.3× fetch\'s default', 'fetch-hyperagent', 'fetch', 1.3));
  rows.push(ratioTarget(httpsHello, '`fetch` with the `Dispatcher`, HTTPS hello ≥ 2× fetch with undici\'s `Agent`',
    'fetch-https-hyperagent', 'fetch-https', 2));
  // How far any dispatcher could take each fetch target: fetch answered with no I/O at all.
  const ceiling = (entry, text, row, base) => {
    const r = entry ? median(ratios(entry, row, base)) : null;
    return [text, x(r), r === null ? 'not measured' : 'the most any dispatcher could reach'];
  };
  rows.push(ceiling(hello, 'ceiling of the fetch HTTP target: fetch answered with no I/O, × fetch\'s default',
    'fetch-ceiling', 'fetch'));
  rows.push(ceiling(httpsHello, 'ceiling of the fetch HTTPS target: fetch answered with no I/O, × fetch with undici\'s `Agent`',
    'fetch-https-ceiling', 'fetch-https'));
  rows.push(ratioTarget(hello, 'undici `request()` with the `Dispatcher`, HTTP hello ≥ 1.3× with undici\'s `Agent`',
    'undici-request-hyperagent', 'undici-request', 1.3));
  rows.push(ceiling(hello, 'ceiling of the undici `request()` target: `request()` answered with no I/O, × with undici\'s `Agent`',
    'undici-request-ceiling', 'undici-request'));
  const h2Hello = byWorkload['h2-hello'];
  rows.push(ratioTarget(h2Hello, '`agent.request()` over HTTP/2, hello with 50 in flight ≥ 2× undici\'s HTTP/2 ' +
    '(`allowH2`, one connection multiplexed)', 'hyperagent-h2', 'undici-h2', 2));
  rows.push(ratioTarget(h2Hello, '`agent.request()` over HTTP/2, hello with 50 in flight ≥ 2× undici\'s HTTP/2 ' +
    'on its defaults (`allowH2` only: a connection per request in flight)', 'hyperagent-h2', 'undici-h2-default', 2));
  rows.push(ratioTarget(h2Hello, '`agent.request()` over HTTP/2, hello with 50 in flight ≥ 1.5× Node\'s `http2` client',
    'hyperagent-h2', 'node-http2', 1.5));
  if (hello) {
    // Judged on event-loop utilisation, the benchmark's definition; the thread's own CPU time
    // is shown beside it.
    const cpu = (field) => {
      const ours = median(values(hello, 'hyperagent-request', field));
      const undici = median(values(hello, 'undici-pool', field));
      return ours !== null && undici > 0 ? { ours, undici, share: ours / undici } : null;
    };
    const elu = cpu('jsCpuUs');
    const own = cpu('mainCpuUs');
    const show = (c) => `${c.ours.toFixed(1)} µs against ${c.undici.toFixed(1)} µs (${x(c.share)})`;
    rows.push(['JS-thread CPU per request, `agent.request()` (HTTP hello) ≤ half of undici `Pool.request`\'s',
      elu === null ? '–' : `${show(elu)}${own ? `; the thread's own CPU time: ${show(own)}` : ''}`,
      verdict(elu === null ? null : elu.share <= 0.5)]);
  }
  const akb = byWorkload.akb;
  if (akb) {
    const created = values(akb, 'hyperagent', 'socketsCreated');
    const accepted = values(akb, 'hyperagent', 'accepted');
    const failed = values(akb, 'hyperagent', 'failures').reduce((a, b) => a + b, 0) +
      akb.runs.filter((run) => run.hyperagent?.error).length;
    const ok = created.length > 0 && created.every((c) => c === 50) && accepted.every((c) => c === 50) && failed === 0;
    rows.push(['agentkeepalive scenario: sockets created = 50, zero failures',
      `created ${[...new Set(created)].join(', ') || '–'} (server accepted ${[...new Set(accepted)].join(', ') || '–'}), ` +
      `${failed} failed`, verdict(created.length ? ok : null)]);
  }
  const idle = byWorkload.idle;
  if (idle) {
    const ours = median(values(idle, 'hyperagent', 'rssAdded'));
    const node = median(values(idle, baseline, 'rssAdded'));
    const r = ours !== null && node > 0 ? ours / node : null;
    const n = int(idle.workload.connections);
    rows.push([`${n} idle connections: ≤ a third of the memory Node's agent needs (RSS)`, x(r),
      verdict(r === null ? null : r <= 1 / 3)]);
  }
  const measured = rows.filter((r) => r[2] !== 'not measured');
  if (measured.length === 0) return '';
  return '## Targets\n\nThe targets of the project\'s benchmark that the rows of this run can check.\n\n' +
    table(['target', 'measured (median)', 'verdict'], measured);
}

function notes(data) {
  const { info } = data;
  const lines = [
    `The server (\`bench/server\`, Rust: hyper 1 on a tokio current-thread runtime) runs in its own process${info.pinned ? ', pinned to CPU 1' : ''}; ` +
      `every client row runs in a fresh Node process (\`bench/client.js\`)${info.pinned ? ', pinned to CPU 0' : ''}, so a client's threads share one core and what counts is its total CPU per request.`,
    `Each workload runs its rows in ${info.runs} round(s), each round in a rotated order; figures are medians over the rounds (min–max where they differ). Ratios are paired: a row's rate divided by Node's keep-alive agent's rate in the same round.`,
    'Every client is limited to the workload\'s connection count per origin (`maxSockets`/`maxFreeSockets` for the Node-style agents, `connections` for undici). Node\'s global `fetch` keeps its default dispatcher, as users call it: that has no connection limit, and it opens more connections than requests in flight (see *sockets*).',
    'Node\'s `http.Agent({ keepAlive: false })` with a finite `maxSockets` still reuses a socket for a request that waits in its queue; it closes a socket only when no request waits, so it opens fewer connections than requests.',
    'req/s and latency are measured after the warm-up (where there is one); a failed request counts as failed and not in the rate. Latency is from the call to the end of the response body.',
    '*sockets*: connections the server accepted while the client process ran (warm-up included). *JS CPU*: event-loop active time (`performance.eventLoopUtilization()`) per request. *JS thread CPU*: the CPU time of the JavaScript thread alone (`/proc/self/task/<pid>/stat`) per request; it differs from *JS CPU* where other threads of the process share the client\'s core (hyperagent\'s tokio thread): event-loop utilisation counts wall time, including the time those threads ran while a callback was under way. *CPU*: `process.cpuUsage()` (every thread of the process) per request. *peak RSS*: `process.resourceUsage().maxRSS`.',
  ];
  if (data.results.some((e) => e.workload.group === 'h2')) {
    lines.push('HTTP/2 workloads: the server speaks HTTP/2 to a client that chooses `h2` in ALPN (and HTTP/1.1 to every other client, all the HTTPS rows among them) and takes up to 1,000 streams on a connection; the HTTP/2 rows get no connection limit but for undici\'s baseline (one connection), and each keeps one connection (see *sockets*) but for undici on its defaults. Their ratios are taken against undici\'s HTTP/2 client given one connection and `pipelining: 1000` (undici 7 sends at most `pipelining` requests at once on a connection, HTTP/2 included, so on its defaults it opens a connection per request in flight: its own row). Each HTTP/2 row checks at setup that the server saw HTTP/2 (`GET /version`; hyperagent\'s also that `httpVersion` is `\'2.0\'`), and after each run the server\'s count of HTTP/2 connections must equal the connections the row opened (for every other TLS row, it must be 0), or the run is an error. Node\'s `http2` session keeps its default flow-control windows (64 KiB).');
  }
  if (info.disturbedThreshold !== undefined) {
    const total = data.results.reduce((n, e) => n + e.runs.reduce((m, run) => m + Object.keys(run).length, 0), 0);
    lines.push(`A client run during which other processes (neither the client nor the server) used more than ${pct(info.disturbedThreshold)} of a core, by \`/proc/stat\` less the two processes' own CPU time, is run again once the machine has been quiet for a second (at most 3 attempts, the least disturbed kept), and so is a client that died without a result (its error is still listed): ${info.retries} repeat(s) over ${total} client runs here${info.waitedS ? `, after ${info.waitedS} s of waiting in all` : ''}.`);
  }
  if (info.mode === 'quick') {
    lines.push('This is a `--quick` run: 1 round; throughput measured for 0.5 s after 0.5 s of warm-up (instead of 2 s after 0.75 s, 1.5 s after 0.5 s for the scale series); the agentkeepalive scenario with 100 requests per caller instead of 1,000; 1,000 idle connections instead of 10,000 (200 idle TLS connections instead of 1,000); the scale rows for Node\'s keep-alive agent and hyperagent\'s two paths only; the 1 MiB, HTTPS 64 KiB and HTTP/2 64 KiB workloads and the pool micro-benchmark left out.');
  }
  return '## How it is measured\n\n' + lines.map((l) => `- ${l}`).join('\n') + '\n';
}

function duration(seconds) {
  return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
}

function header(info) {
  const fetchNote = info.undiciInNode ? ` (\`fetch\`: Node's bundled undici ${info.undiciInNode})` : '';
  return `# hyperagent benchmark\n\n` +
    `${info.cpu}, ${info.cores} cores${info.pinned ? ' (server on CPU 1, clients on CPU 0)' : ''} · ${info.os} · ` +
    `Node ${info.node} · ${info.date.slice(0, 10)}\n\n` +
    `hyperagent ${info.commit} · agentkeepalive ${info.agentkeepalive} · undici ${info.undici}${fetchNote} · ` +
    `${info.mode} run, ${info.runs} run(s) per row${info.durationS ? `, ${duration(info.durationS)}` : ''}\n\n` +
    'Produced by `npm run bench' + (info.mode === 'quick' ? ' -- --quick' : '') + '`.\n';
}

function renderMarkdown(data) {
  const { results, baseline, micro, info } = data;
  const byWorkload = Object.fromEntries(results.map((e) => [e.workload.id, e]));
  const parts = [header(info), summary(results, baseline), targetsSection(byWorkload, baseline)];
  const throughput = results.filter((e) => e.workload.group === 'throughput');
  const https = results.filter((e) => e.workload.group === 'https');
  for (const entry of [...throughput, ...https]) {
    parts.push(`## ${entry.workload.title}\n\n${describeLoad(entry.workload)}\n\n${loadTable(entry, baseline)}${footnotes([entry])}`);
  }
  for (const entry of results.filter((e) => e.workload.group === 'h2')) {
    const memory = entry.workload.streamMemory ? `\n${streamMemoryTable(entry)}` : '';
    parts.push(`## ${entry.workload.title}\n\n${describeLoad(entry.workload)}\n\n${loadTable(entry, baseline)}${memory}` +
      footnotes([entry]));
  }
  if (byWorkload['hello-als']) parts.push(contextSection(byWorkload['hello-als'], byWorkload.hello));
  if (byWorkload.akb) parts.push(akbSection(byWorkload.akb, baseline));
  const keepalive = results.filter((e) => e.workload.group === 'keepalive');
  if (keepalive.length) parts.push(keepAliveSection(keepalive));
  for (const entry of results.filter((e) => e.workload.group === 'idle')) {
    parts.push(idleSection(entry, baseOf(entry, baseline)));
  }
  const scale = results.filter((e) => e.workload.group === 'scale');
  if (scale.length || micro) parts.push(scaleSection(scale, micro, baseline));
  parts.push(notes(data));
  return parts.filter(Boolean).join('\n');
}

// ---- The chart ---------------------------------------------------------------------------------

const COLORS = {
  'node-close': '#b8c2cc',
  'node-ka': '#52606d',
  agentkeepalive: '#8795a1',
  'undici-pool': '#1f6fb2',
  'undici-request': '#4a9fe0',
  fetch: '#9cc9ee',
  'fetch-hyperagent': '#f76707',
  'undici-request-hyperagent': '#d9480f',
  'undici-request-https': '#4a9fe0',
  'fetch-https': '#9cc9ee',
  'undici-request-https-hyperagent': '#d9480f',
  'fetch-https-hyperagent': '#f76707',
  hyperagent: '#e8590c',
  'hyperagent-request': '#c92a2a',
  'node-https-ka': '#52606d',
  'agentkeepalive-https': '#8795a1',
  'undici-pool-https': '#1f6fb2',
  'hyperagent-https': '#e8590c',
  'hyperagent-https-request': '#c92a2a',
  'undici-h2': '#4a9fe0',
  'undici-h2-default': '#9cc9ee',
  'node-http2': '#52606d',
  'hyperagent-h2': '#c92a2a',
  'fetch-h2-hyperagent': '#f76707',
};
const FALLBACK = ['#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#c2255c'];

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

// A horizontal bar per row and workload: the median ratio against Node's keep-alive agent,
// with a whisker from the smallest to the largest run.
function renderSvg(data) {
  const { info, baseline } = data;
  const entries = data.results.filter((e) => CHARTED.has(e.workload.group));
  const W = 960;
  const left = 250;
  const right = W - 70;
  const barH = 14;
  const gap = 5;
  const groupHead = 26;
  const top = 78;
  const groups = entries.map((e) => ({
    title: e.workload.title,
    base: baseOf(e, baseline),
    baseRps: median(values(e, baseOf(e, baseline), 'rps')),
    bars: clientIds(e).map((id) => ({ id, s: spread(ratios(e, id, baseOf(e, baseline))) })).filter((b) => b.s),
  }));
  const maxRatio = Math.max(1.5, ...groups.flatMap((g) => g.bars.map((b) => b.s.max)));
  const scaleMax = Math.ceil(maxRatio * 4) / 4;
  const tick = scaleMax > 3 ? 1 : scaleMax > 1.5 ? 0.5 : 0.25;
  const X = (v) => left + (v / scaleMax) * (right - left);
  const height = top + groups.reduce((h, g) => h + groupHead + g.bars.length * (barH + gap) + 12, 0) + 30;

  let fallback = 0;
  const color = (id) => COLORS[id] ?? FALLBACK[fallback++ % FALLBACK.length];
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="20" y="28" font-size="17" font-weight="bold" fill="#1f2933">Requests per second relative to Node's keep-alive agent (http.Agent / https.Agent)</text>`);
  const h2 = groups.some((g) => g.base !== 'node-ka' && g.base !== 'node-https-ka') ? ' · HTTP/2: relative to the row its title names' : '';
  out.push(`<text x="20" y="48" fill="#52606d">${esc(`${info.cpu}, ${info.cores} cores · Node ${info.node} · ${info.date.slice(0, 10)} · ${info.mode} run, median of ${info.runs} run(s), whiskers min–max${h2}`)}</text>`);

  // Grid and axis labels.
  const chartBottom = height - 30;
  for (let v = 0; v <= scaleMax + 1e-9; v += tick) {
    const gx = X(v).toFixed(1);
    out.push(`<line x1="${gx}" y1="${top - 8}" x2="${gx}" y2="${chartBottom}" stroke="#e4e7eb" stroke-width="1"/>`);
    out.push(`<text x="${gx}" y="${chartBottom + 16}" text-anchor="middle" fill="#616e7c">${v.toFixed(tick < 0.5 ? 2 : 1)}×</text>`);
  }

  const one = X(1).toFixed(1);
  let y = top;
  for (const g of groups) {
    const baseName = g.base === 'node-ka' || g.base === 'node-https-ka' ? 'Node keep-alive' : `1× = ${label(g.base)}`;
    const base = g.baseRps === null ? '' : ` — ${baseName}: ${int(g.baseRps)} req/s`;
    // Titles are markdown; the chart shows them plain.
    const title = g.title.replace(/`/g, '');
    out.push(`<text x="20" y="${y + 14}" font-weight="bold" fill="#1f2933">${esc(title + base)}</text>`);
    y += groupHead;
    const groupTop = y;
    for (const b of g.bars) {
      const cy = y + barH / 2;
      const fill = color(b.id);
      const bold = b.id.startsWith('hyperagent') ? ' font-weight="bold"' : '';
      out.push(`<text x="${left - 8}" y="${cy + 4}" text-anchor="end" fill="#323f4b"${bold}>${esc(label(b.id))}</text>`);
      out.push(`<rect x="${left}" y="${y}" width="${(X(b.s.median) - left).toFixed(1)}" height="${barH}" fill="${fill}"/>`);
      if (b.s.n > 1 && b.s.max > b.s.min) {
        const x1 = X(b.s.min).toFixed(1);
        const x2 = X(b.s.max).toFixed(1);
        out.push(`<path d="M${x1} ${cy}H${x2}M${x1} ${cy - 4}V${cy + 4}M${x2} ${cy - 4}V${cy + 4}" stroke="#1f2933" stroke-width="1"/>`);
      }
      out.push(`<text x="${(Math.max(X(b.s.median), X(b.s.max)) + 6).toFixed(1)}" y="${cy + 4}" fill="#323f4b"${bold}>${b.s.median.toFixed(2)}×</text>`);
      y += barH + gap;
    }
    // Node's keep-alive agent, the reference, over this group's bars.
    out.push(`<line x1="${one}" y1="${groupTop - 3}" x2="${one}" y2="${y - gap + 3}" stroke="#1f2933" stroke-width="1.5" stroke-dasharray="4 3"/>`);
    y += 12;
  }
  out.push(`<text x="${one}" y="${top - 12}" text-anchor="middle" fill="#1f2933">Node keep-alive = 1</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function render(data) {
  return { markdown: renderMarkdown(data), svg: renderSvg(data) };
}

module.exports = { render };

if (require.main === module) {
  const data = JSON.parse(fs.readFileSync(path.join(__dirname, 'results.json'), 'utf8'));
  const { markdown, svg } = render(data);
  fs.writeFileSync(path.join(__dirname, 'results.md'), markdown);
  fs.writeFileSync(path.join(__dirname, 'results.svg'), svg);
  process.stdout.write(markdown);
}
