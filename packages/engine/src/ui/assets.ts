/**
 * The web view's page: one HTML shell, one stylesheet, one script — no framework, no build step,
 * no external request. The script renders with DOM APIs and `textContent` only (run data never
 * becomes markup), routes on the URL hash (`#/` runs, `#/runs/<id>` a run), and polls the JSON
 * API every few seconds while the tab is visible (the live refresh). Actions show only when the
 * server was started with them enabled, and send the `X-Ratchet-Action` header the server
 * requires (a custom header: a cross-site form or image cannot send it).
 */

export const PAGE_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ratchet</title>
<link rel="stylesheet" href="/app.css">
</head>
<body>
<header>
  <a href="#/" class="brand">Ratchet</a>
  <span id="tenant" class="muted"></span>
  <span class="spacer"></span>
  <span id="live" class="muted" data-testid="live">connecting…</span>
</header>
<div id="banner" class="banner" hidden></div>
<main id="view"></main>
<script src="/app.js"></script>
</body>
</html>
`;

export const PAGE_CSS = String.raw`
:root { --fg: #1d2330; --muted: #6b7385; --line: #e3e6ec; --bg: #fff; --soft: #f6f7f9; --accent: #3451b2;
  --ok: #1a7f37; --bad: #c62828; --warn: #9a6700; --info: #3451b2; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 12px; align-items: center; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--soft); }
.brand { font-weight: 700; color: var(--fg); text-decoration: none; letter-spacing: .02em; }
.spacer { flex: 1; }
.muted { color: var(--muted); }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 18px; margin: 4px 0 8px; } h2 { font-size: 15px; margin: 22px 0 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
tr.clickable:hover { background: var(--soft); cursor: pointer; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
pre { background: var(--soft); padding: 10px; border-radius: 6px; overflow: auto; max-height: 360px; margin: 6px 0; }
a { color: var(--accent); }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; background: var(--soft); border: 1px solid var(--line); }
.s-completed, .s-succeeded, .s-committed { color: var(--ok); }
.s-failed, .s-cancelled, .s-unknown { color: var(--bad); }
.s-parked, .s-reserved, .s-sealed { color: var(--warn); }
.s-running, .s-pending, .s-sleeping, .s-waiting { color: var(--info); }
.filters { display: flex; gap: 8px; flex-wrap: wrap; margin: 8px 0 12px; align-items: center; }
input, select, button, textarea { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
button { cursor: pointer; } button.danger { color: var(--bad); }
.cards { display: flex; gap: 10px; flex-wrap: wrap; margin: 4px 0 10px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 6px 12px; min-width: 96px; }
.card b { display: block; font-size: 18px; }
.banner { margin: 10px 20px 0; padding: 8px 12px; border-radius: 6px; background: #fff4e5; color: var(--warn); border: 1px solid #f3d9a4; }
.error { color: var(--bad); white-space: pre-wrap; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
.actions { display: flex; gap: 8px; margin: 10px 0; flex-wrap: wrap; align-items: center; }
details summary { cursor: pointer; color: var(--accent); }
`;

export const PAGE_JS = String.raw`
(function () {
  'use strict';
  var config = { actions: false, refreshMs: 2000, traceUrl: null, tenantId: null };
  var view = document.getElementById('view');
  var live = document.getElementById('live');
  var banner = document.getElementById('banner');
  var timer = null, lastOk = null, filters = { state: '', workflow: '', version: '' };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (attrs[k] === undefined || attrs[k] === null || attrs[k] === false) continue;
      if (k === 'text') node.textContent = String(attrs[k]);
      else if (k === 'onclick' || k === 'onchange' || k === 'onsubmit' || k === 'oninput') node[k] = attrs[k];
      else node.setAttribute(k, attrs[k] === true ? '' : String(attrs[k]));
    }
    (children || []).forEach(function (c) { if (c !== null && c !== undefined) node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return node;
  }
  function show() { view.replaceChildren.apply(view, Array.prototype.filter.call(arguments, function (n) { return n !== null && n !== undefined; })); }
  function badge(state) { return el('span', { 'class': 'badge s-' + state, text: state, 'data-testid': 'state' }); }
  function ago(iso) {
    if (!iso) return '-';
    var ms = Date.now() - new Date(iso).getTime(), a = Math.abs(ms), s;
    if (a < 1000) s = a + 'ms'; else if (a < 60000) s = Math.round(a / 1000) + 's';
    else if (a < 3600000) s = Math.round(a / 60000) + 'm'; else if (a < 86400000) s = Math.round(a / 3600000) + 'h'; else s = Math.round(a / 86400000) + 'd';
    return ms >= 0 ? s + ' ago' : 'in ' + s;
  }
  function dur(ms) {
    if (ms === null || ms === undefined) return '-';
    if (ms < 1000) return ms + 'ms'; if (ms < 60000) return (ms / 1000).toFixed(2) + 's';
    if (ms < 3600000) return (ms / 60000).toFixed(1) + 'm'; if (ms < 86400000) return (ms / 3600000).toFixed(1) + 'h';
    return (ms / 86400000).toFixed(1) + 'd';
  }
  function brief(v, max) { if (v === undefined || v === null) return ''; var t = JSON.stringify(v); max = max || 80; return t.length > max ? t.slice(0, max - 1) + '…' : t; }
  function table(headers, rows, onRow) {
    return el('table', null, [
      el('thead', null, [el('tr', null, headers.map(function (h) { return el('th', { text: h }); }))]),
      el('tbody', null, rows.map(function (r, i) {
        var tr = el('tr', onRow ? { 'class': 'clickable', onclick: function () { onRow(i); } } : null, r.cells.map(function (c) { return c instanceof Node ? el('td', null, [c]) : el('td', { text: c }); }));
        if (r.testid) tr.setAttribute('data-testid', r.testid);
        return tr;
      }))
    ]);
  }
  function api(path, init) {
    return fetch(path, Object.assign({ credentials: 'same-origin', headers: { accept: 'application/json' } }, init || {})).then(function (res) {
      return res.json().then(function (body) {
        if (!res.ok) throw new Error((body && body.error) ? body.error.code + ': ' + body.error.message : 'HTTP ' + res.status);
        return body;
      });
    });
  }
  function act(path, body) {
    return api(path, { method: 'POST', body: JSON.stringify(body || {}), headers: { 'content-type': 'application/json', 'x-ratchet-action': '1', accept: 'application/json' } });
  }
  function traceLink(traceId, spanId) {
    if (!traceId) return null;
    if (!config.traceUrl) return el('code', { text: traceId });
    var href = config.traceUrl.split('{traceId}').join(traceId).split('{spanId}').join(spanId || '');
    return el('a', { href: href, target: '_blank', rel: 'noopener noreferrer', 'data-testid': 'trace-link', text: traceId });
  }

  function renderRuns(data) {
    var runs = data.runs, stats = data.stats;
    var counts = {};
    stats.runs.forEach(function (r) { counts[r.state] = (counts[r.state] || 0) + r.runs; });
    var cards = ['pending', 'running', 'sleeping', 'waiting', 'parked', 'failed', 'completed', 'cancelled'].map(function (s) {
      return el('div', { 'class': 'card' }, [el('span', { 'class': 's-' + s, text: s }), el('b', { text: String(counts[s] || 0) })]);
    });
    var states = ['', 'pending', 'running', 'sleeping', 'waiting', 'parked', 'completed', 'failed', 'cancelled'];
    var stateSel = el('select', { 'data-testid': 'filter-state', onchange: function (e) { filters.state = e.target.value; refresh(); } },
      states.map(function (s) { var o = el('option', { value: s, text: s || 'any state' }); if (s === filters.state) o.selected = true; return o; }));
    var wf = el('input', { placeholder: 'workflow', value: filters.workflow, 'data-testid': 'filter-workflow', onchange: function (e) { filters.workflow = e.target.value.trim(); refresh(); } });
    var ver = el('input', { placeholder: 'version', value: filters.version, size: 8, onchange: function (e) { filters.version = e.target.value.trim(); refresh(); } });
    var warn = stats.unserved.length ? el('div', { 'class': 'banner', 'data-testid': 'unserved' }, ['No live worker for: ' + stats.unserved.map(function (u) { return u.workflow + '@' + u.version + ' (' + u.runs + ' runs)'; }).join(', ')]) : null;
    var rows = runs.map(function (r) {
      return { testid: 'run-row', cells: [el('a', { href: '#/runs/' + r.runId, 'class': 'mono', text: r.runId }), r.workflow + '@' + r.version, badge(r.state), ago(r.createdAt), ago(r.updatedAt),
        r.error ? (r.error.code || r.error.name) + ': ' + r.error.message : (r.wakeAt ? 'wakes ' + ago(r.wakeAt) : '')] };
    });
    show(
      el('h1', { text: 'Runs' }),
      el('div', { 'class': 'cards' }, cards),
      warn,
      el('div', { 'class': 'filters' }, [stateSel, wf, ver, el('span', { 'class': 'muted', text: runs.length + ' shown · ' + stats.workers.filter(function (w) { return w.live; }).length + ' live worker(s)' })]),
      runs.length ? table(['Run', 'Workflow', 'State', 'Created', 'Updated', 'Detail'], rows, function (i) { location.hash = '#/runs/' + runs[i].runId; }) : el('p', { 'class': 'muted', text: 'No runs match.' })
    );
  }

  function stepDetail(s, d) {
    var parts = [];
    if (s.kind === 'sleep' && s.result && s.result.wakeAt) parts.push('until ' + s.result.wakeAt);
    if (s.kind === 'wait' && s.state === 'reserved') parts.push('waiting' + (s.deadlineAt ? ' until ' + s.deadlineAt : ''));
    if (s.idempotencyKey) parts.push('key ' + s.idempotencyKey);
    if (s.providerReference) parts.push(s.providerReference === 'reconciled' ? 'settled by reconcile()' : s.providerReference);
    if (s.kind === 'seal') d.contracts.forEach(function (c) { if (c.stepKey === s.stepKey) parts.push('contract ' + c.bodyHash.slice(0, 12) + '… ' + c.status); });
    if (s.error) parts.push((s.error.code || s.error.name) + ': ' + s.error.message);
    else if (s.result !== null && s.result !== undefined && s.kind !== 'sleep') parts.push('→ ' + brief(s.result, 60));
    return parts.join(' · ');
  }

  function renderRun(d) {
    var r = d.run, t0 = new Date(r.createdAt).getTime();
    var facts = el('div', { 'class': 'facts' }, [
      'Tenant', el('code', { text: r.tenantId }), 'Created', r.createdAt + ' (' + ago(r.createdAt) + ')', 'Updated', r.updatedAt,
      'Claims', String(r.claimCount), 'Key', r.idempotencyKey || '-',
      'Trace', traceLink(r.traceId, r.spanId) || '-',
      'Input', el('code', { text: brief(r.input, 200) })
    ].concat(r.wakeAt ? ['Wakes', r.wakeAt + ' (' + ago(r.wakeAt) + ')'] : [])
     .concat(r.leaseOwner ? ['Lease', r.leaseOwner + ' until ' + r.leaseExpiresAt] : [])
     .concat(r.parentId ? ['Parent', el('a', { href: '#/runs/' + r.parentId, text: r.parentId })] : [])
     .concat(r.state === 'completed' ? ['Output', el('code', { text: brief(r.output, 300) })] : [])
     .map(function (x) { return typeof x === 'string' ? el('span', { text: x }) : x; }));
    var actions = config.actions ? renderActions(d) : null;
    var steps = table(['Seq', 'Step', 'Kind', 'State', 'Attempt', 'At', 'Duration', 'Detail'], d.steps.map(function (s) {
      return { testid: 'step-row', cells: [String(s.seq), el('code', { text: s.stepKey }), s.kind, badge(s.state), String(s.attempt), '+' + dur(new Date(s.createdAt).getTime() - t0), s.durationMs === null ? (s.state === 'reserved' ? 'in flight' : '-') : dur(s.durationMs), stepDetail(s, d)] };
    }));
    var contracts = d.contracts.map(function (c) {
      return el('div', { 'data-testid': 'contract', 'data-contract-id': c.id }, [
        el('div', null, [badge(c.status), ' ', el('code', { 'data-testid': 'contract-hash', text: c.bodyHash }), el('span', { 'class': 'muted', text: '  ' + (c.stepKey || '') + ' · key ' + c.idempotencyKey + (c.committedAt ? ' · committed ' + c.committedAt : '') })]),
        c.errorDetail ? el('div', { 'class': 'error', text: JSON.stringify(c.errorDetail) }) : null,
        el('details', null, [el('summary', { text: 'body' }), el('pre', { 'data-testid': 'contract-body', text: JSON.stringify(c.body, null, 2) })])
      ]);
    });
    show(
      el('div', null, [el('a', { href: '#/', text: '← runs' })]),
      el('h1', null, [el('span', { 'class': 'mono', 'data-testid': 'run-id', text: r.runId }), ' ', badge(r.state)]),
      el('div', { 'class': 'muted', text: r.workflow + '@' + r.version }),
      r.error ? el('div', { 'class': 'error', 'data-testid': 'run-error', text: r.error.name + (r.error.code ? ' [' + r.error.code + ']' : '') + ': ' + r.error.message }) : null,
      facts, actions,
      el('h2', { text: 'Steps (' + d.steps.length + ')' }), d.steps.length ? steps : el('p', { 'class': 'muted', text: 'No steps recorded yet.' }),
      d.contracts.length ? el('h2', { text: 'Contracts (' + d.contracts.length + ')' }) : null
    );
    contracts.forEach(function (c) { view.appendChild(c); });
    if (d.signals.length) { view.appendChild(el('h2', { text: 'Signals' })); view.appendChild(table(['Name', 'Sent', 'Consumed', 'Payload'], d.signals.map(function (s) { return { cells: [s.name, s.createdAt, s.consumedAt ? (s.consumedBy + ' at ' + s.consumedAt) : 'pending', brief(s.payload)] }; }))); }
    if (d.children.length) { view.appendChild(el('h2', { text: 'Children' })); view.appendChild(table(['Run', 'Workflow', 'State'], d.children.map(function (c) { return { cells: [el('a', { href: '#/runs/' + c.runId, text: c.runId }), c.workflow + '@' + c.version, badge(c.state)] }; }))); }
    view.appendChild(el('h2', { text: 'Events (' + d.events.length + ')' }));
    view.appendChild(table(['Seq', 'Event', 'At', 'Actor', 'Payload'], d.events.map(function (e) { return { testid: 'event-row', cells: [String(e.seq), e.type, e.createdAt, e.actor || '-', brief(e.payload, 120)] }; })));
  }

  function renderActions(d) {
    var r = d.run, base = '/api/runs/' + r.runId + '/', out = el('span', { 'class': 'muted', 'data-testid': 'action-result' });
    function run(path, body, confirmText) {
      if (confirmText && !window.confirm(confirmText)) return;
      act(base + path, body).then(function () { out.textContent = path + ': done'; refresh(); }, function (e) { out.textContent = e.message; });
    }
    var buttons = [];
    if (['pending', 'running', 'sleeping', 'waiting', 'parked'].indexOf(r.state) >= 0) {
      buttons.push(el('button', { 'class': 'danger', 'data-testid': 'action-cancel', text: 'Cancel', onclick: function () { run('cancel', {}, 'Cancel run ' + r.runId + '?'); } }));
      var name = el('input', { placeholder: 'signal name', size: 12 }), payload = el('input', { placeholder: 'payload JSON', size: 18 });
      buttons.push(name, payload, el('button', { text: 'Signal', onclick: function () {
        var p = null; try { p = payload.value ? JSON.parse(payload.value) : null; } catch (e) { out.textContent = 'payload is not JSON'; return; }
        run('signal', { name: name.value, payload: p });
      } }));
    }
    if (r.state === 'failed') buttons.push(el('button', { 'data-testid': 'action-retry', text: 'Retry from failure point', onclick: function () { run('retry', {}, 'Retry run ' + r.runId + ' from its failure point?'); } }));
    if (r.state === 'parked') d.steps.filter(function (s) { return s.state === 'unknown' || s.state === 'reserved'; }).forEach(function (s) {
      var value = el('input', { placeholder: 'result JSON for ' + s.stepKey, size: 22 });
      buttons.push(value, el('button', { text: 'Resolve ' + s.stepKey, onclick: function () {
        var v; try { v = JSON.parse(value.value || 'null'); } catch (e) { out.textContent = 'result is not JSON'; return; }
        run('resolve', { stepKey: s.stepKey, result: v }, 'Settle ' + s.stepKey + ' as succeeded?');
      } }), el('button', { 'class': 'danger', text: 'Fail ' + s.stepKey, onclick: function () { run('resolve', { stepKey: s.stepKey, error: 'settled as failed by an operator' }, 'Settle ' + s.stepKey + ' as failed?'); } }));
    });
    buttons.push(out);
    return el('div', { 'class': 'actions' }, buttons);
  }

  function route() { var m = /^#\/runs\/([0-9a-fA-F-]{36})/.exec(location.hash); return m ? { run: m[1] } : { list: true }; }
  function typing() {
    var a = document.activeElement;
    return !!a && view.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName);
  }
  function refresh(auto) {
    var r = route(), p;
    // A live refresh never redraws under the operator's cursor, nor closes a contract body they
    // opened — read when the answer arrives, not when it was asked for: a body opened while the
    // request was in flight stays open too.
    if (r.run) p = api('/api/runs/' + r.run).then(function (d) {
      if (route().run !== r.run || (auto && typing())) return;
      var open = {};
      Array.prototype.forEach.call(view.querySelectorAll('[data-contract-id] details[open]'), function (details) { open[details.parentNode.getAttribute('data-contract-id')] = true; });
      renderRun(d);
      Array.prototype.forEach.call(view.querySelectorAll('[data-contract-id]'), function (c) { if (open[c.getAttribute('data-contract-id')]) c.querySelector('details').open = true; });
    });
    else {
      var q = []; ['state', 'workflow', 'version'].forEach(function (k) { if (filters[k]) q.push(k + '=' + encodeURIComponent(filters[k])); });
      p = Promise.all([api('/api/runs' + (q.length ? '?' + q.join('&') : '')), api('/api/stats')]).then(function (x) { if (route().list && !(auto && typing())) renderRuns({ runs: x[0], stats: x[1] }); });
    }
    return p.then(function () { lastOk = Date.now(); banner.hidden = true; live.textContent = 'live · updated just now'; },
      function (e) { banner.hidden = false; banner.textContent = e.message; });
  }
  function loop() {
    clearTimeout(timer);
    timer = setTimeout(function () { (document.hidden ? Promise.resolve() : refresh(true)).then(loop, loop); }, config.refreshMs);
  }
  setInterval(function () { if (lastOk) live.textContent = 'live · updated ' + ago(new Date(lastOk).toISOString()); }, 1000);
  window.addEventListener('hashchange', function () { view.replaceChildren(el('p', { 'class': 'muted', text: 'loading…' })); refresh(); });
  api('/api/config').then(function (c) {
    config = c;
    document.getElementById('tenant').textContent = 'tenant ' + c.tenantId + (c.actions ? ' · actions enabled' : ' · read-only');
    return refresh();
  }).then(loop, function (e) { banner.hidden = false; banner.textContent = e.message; loop(); });
})();
`;
