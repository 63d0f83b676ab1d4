// SPDX-License-Identifier: MIT
// shmclock-panel's page: one EventSource (/events), one card per clock.
// Everything from the server is put in with textContent, never as HTML:
// participants name themselves.
'use strict';

const cards = new Map();
let control = false;
const only = location.pathname.startsWith('/clock/') ?
  decodeURIComponent(location.pathname.slice(7)) : null;

// The token: typed in the header's field, or given as #token=... (a
// fragment never reaches the server); kept for this tab only.
(function () {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('shmclock-token', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname);
  }
  const input = document.getElementById('token');
  input.value = sessionStorage.getItem('shmclock-token') || '';
  input.addEventListener('input', () => sessionStorage.setItem('shmclock-token', input.value));
  document.getElementById('tokenform').addEventListener('submit', (e) => e.preventDefault());
})();

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function fmtSecs(s) {
  if (s === undefined || s === null || isNaN(s)) return '–';
  return s >= 100 ? s.toFixed(1) + ' s' : s >= 1 ? s.toFixed(3) + ' s' : (s * 1e3).toFixed(3) + ' ms';
}

function fmtNs(ns) { return fmtSecs(Number(ns) / 1e9); }

async function send(clock, cmd, arg) {
  const body = { clock, cmd };
  if (arg !== undefined) body.arg = arg;
  const card = cards.get(clock);
  try {
    const r = await fetch('/api/control', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json',
                 'X-Shmclock-Token': sessionStorage.getItem('shmclock-token') || '' },
      body: JSON.stringify(body),
    });
    const j = await r.json().catch(() => ({ ok: false, error: 'HTTP ' + r.status }));
    card.msg.textContent = j.ok ? cmd + ': done' : cmd + ': ' + j.error;
    card.msg.className = j.ok ? 'dim' : 'error';
  } catch (e) {
    card.msg.textContent = cmd + ': ' + e;
    card.msg.className = 'error';
  }
}

function controls(name) {
  const box = el('div', { class: 'controls' });
  const btn = (label, cmd, input) => {
    const b = el('button', { type: 'button', 'data-cmd': cmd }, label);
    b.addEventListener('click', () => send(name, cmd, input ? input.value : undefined));
    return b;
  };
  const scale = el('input', { value: '1', 'aria-label': 'scale' });
  const step = el('input', { value: '100ms', 'aria-label': 'step' });
  const set = el('input', { value: '0s', 'aria-label': 'time' });
  box.append(btn('Pause', 'pause'), btn('Resume', 'resume'),
    el('label', {}, btn('Scale', 'scale', scale), scale),
    el('label', {}, btn('Step', 'step', step), step),
    el('label', {}, btn('Set', 'set', set), set));
  return box;
}

function card(name) {
  const c = {};
  c.root = el('section', { class: 'clock', 'data-clock': name });
  c.state = el('span', { class: 'state' });
  c.sim = el('div', { class: 'sim' }, '–');
  c.world = el('div', { class: 'world' });
  c.facts = el('dl', { class: 'facts' });
  c.fact = {};
  for (const [k, label] of [['scale', 'scale'], ['rtf', 'achieved'], ['source', 'source'],
    ['epoch', 'jumps'], ['pid', 'writer'], ['commits', 'commits'], ['ticks', 'ticks'],
    ['late', 'late p99']]) {
    c.fact[k] = el('dd', {}, '–');
    c.facts.append(el('dt', {}, label), c.fact[k]);
  }
  c.controls = controls(name);
  c.controls.hidden = true;
  c.msg = el('div', { class: 'dim' });
  c.err = el('div', { class: 'error' });
  c.rtfPlot = el('canvas', { width: 320, height: 110, class: 'rtf' });
  c.histPlot = el('canvas', { width: 220, height: 110, class: 'hist' });
  c.ls = el('div', { class: 'lockstep' });
  c.hosts = el('div', { class: 'hosts' });
  c.root.append(el('h2', {}, name, c.state), c.sim, c.world, c.facts, c.controls, c.msg, c.err,
    el('div', { class: 'plots' },
      el('figure', {}, c.rtfPlot, el('figcaption', {}, 'real-time factor, last minutes')),
      el('figure', {}, c.histPlot, el('figcaption', {}, 'tick lateness'))),
    c.ls, c.hosts);
  c.history = [];
  document.getElementById('clocks').append(c.root);
  cards.set(name, c);
  return c;
}

function plotLine(cv, data) {
  const g = cv.getContext('2d'), w = cv.width, h = cv.height;
  g.clearRect(0, 0, w, h);
  if (!data.length) return;
  const max = Math.max(1e-9, ...data) * 1.15;
  g.strokeStyle = '#dde1e8';
  g.fillStyle = '#6a7385';
  g.font = '10px sans-serif';
  g.fillText(max.toPrecision(3), 2, 10);
  g.fillText('0', 2, h - 2);
  g.beginPath();
  g.strokeStyle = '#2f6fde';
  g.lineWidth = 1.5;
  data.forEach((v, i) => {
    // The first minute fills the plot; five minutes at most are kept.
    const x = w - (data.length - 1 - i) * (w / Math.max(60, data.length)), y = h - (v / max) * (h - 12);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
}

function plotHist(cv, pairs) {
  const g = cv.getContext('2d'), w = cv.width, h = cv.height;
  g.clearRect(0, 0, w, h);
  if (!pairs || !pairs.length) {
    g.fillStyle = '#6a7385';
    g.font = '11px sans-serif';
    g.fillText('no ticks: this clock moves', 6, h / 2 - 6);
    g.fillText('with its steps', 6, h / 2 + 8);
    return;
  }
  // Buckets of the daemon's histogram merged by power of two of the lowest ns.
  const bins = new Map();
  for (const [lo, n] of pairs) {
    const k = lo < 1 ? 0 : Math.floor(Math.log2(lo));
    bins.set(k, (bins.get(k) || 0) + n);
  }
  const keys = [...bins.keys()].sort((a, b) => a - b);
  const lo = keys[0], hi = keys[keys.length - 1], max = Math.max(...bins.values());
  const bw = w / (hi - lo + 1);
  g.fillStyle = '#2f6fde';
  for (const [k, n] of bins) {
    const bh = Math.max(1, Math.log1p(n) / Math.log1p(max) * (h - 14));
    g.fillRect((k - lo) * bw + 1, h - 12 - bh, Math.max(1, bw - 2), bh);
  }
  g.fillStyle = '#6a7385';
  g.font = '10px sans-serif';
  g.fillText(fmtNs(2 ** lo), 1, h - 1);
  const right = fmtNs(2 ** (hi + 1));
  g.fillText(right, w - g.measureText(right).width - 1, h - 1);
}

function lockstep(c, ls, clock) {
  c.ls.replaceChildren();
  if (!ls) return;
  c.ls.append(el('div', {}, `lockstep: ${ls.members.length} of ${ls.participants_required} participants, ` +
    `${ls.advances} steps` + (ls.steps_per_s ? `, ${ls.steps_per_s.toFixed(0)} steps/s` : '') +
    (ls.running ? '' : ', waiting for joins') + (ls.aborted ? ', ABORTED' : '')));
  const head = ['participant', 'pid', 'grant', 'grants', 'steps', 'working', 'waiting',
    'work p50/p99 µs', 'wait p50/p99 µs', 'last to grant', 'holding'];
  if (control) head.push('');
  const t = el('table', { class: 'participants' },
    el('thead', {}, el('tr', {}, ...head.map((x) => el('th', {}, x)))));
  const body = el('tbody');
  for (const m of ls.members) {
    const tr = el('tr', { class: 'participant' + (m.holding ? ' holding' : ''), 'data-name': m.name },
      el('td', {}, m.host ? `${m.name} on ${m.host}` : m.name), el('td', {}, String(m.pid)),
      el('td', {}, m.grant),
      el('td', {}, String(m.grants ?? '–')), el('td', {}, String(m.steps ?? '–')),
      el('td', {}, fmtSecs(m.work_s)), el('td', {}, fmtSecs(m.wait_s)),
      el('td', {}, m.work_p50_us !== undefined ? `${m.work_p50_us.toFixed(1)} / ${m.work_p99_us.toFixed(1)}` : '–'),
      el('td', {}, m.wait_p50_us !== undefined ? `${m.wait_p50_us.toFixed(1)} / ${m.wait_p99_us.toFixed(1)}` : '–'),
      el('td', {}, String(m.last_to_grant ?? '–')),
      el('td', {}, m.holding ? (m.holding_for_s !== undefined ? 'HOLDING ' + fmtSecs(m.holding_for_s) : 'HOLDING') : ''));
    if (control && m.host) {
      tr.append(el('td', {}, '')); // evicted on its own host
    } else if (control) {
      const b = el('button', { type: 'button', 'data-cmd': 'evict' }, 'Evict');
      b.addEventListener('click', () => send(clock, 'evict', m.name));
      tr.append(el('td', {}, b));
    }
    body.append(tr);
  }
  t.append(body);
  c.ls.append(t);
  // Between hosts: the leader's hosts, a follower host's leader.
  for (const h of ls.hosts ?? []) {
    c.ls.append(el('div', { class: 'lshost' }, `host ${h.host}: ${h.participants} participants, ` +
      `promise ${h.promise_ns}, heard ${fmtSecs(h.heard_s)} ago` +
      (h.rtt_us !== undefined ? `, round trip ${h.rtt_us.toFixed(0)} µs` : '') + `, ${h.deaths} deaths`));
  }
  if (ls.leader !== undefined) {
    c.ls.append(el('div', { class: 'lshost' }, `a host of leader ${ls.leader || '(none yet)'}` +
      (ls.counted ? '' : ', not counted yet') + `: promised ${ls.promised_ns}` +
      (ls.heard_ns !== undefined ? `, heard ${ls.heard_ns}` : '')));
  }
}

function hosts(c, d) {
  c.hosts.replaceChildren();
  if (!d) return;
  const txt = d.role === 'leader' ?
    `leading '${d.clock}' as ${d.leader}, term ${d.term ?? '?'}: ${d.changes} changes, ${d.queued ?? 0} queued, ${d.sent} messages, applied p99 ${fmtNs(d.applied_p99_ns ?? 0)}` +
    (d.deposed ? ' — DEPOSED: a leader of a higher term publishes' : '') :
    `following '${d.clock}' from ${d.leader || '(none yet)'}, term ${d.term ?? '?'}: ${d.changes} changes, ${d.late_changes} late ` +
    `(worst ${fmtNs(d.worst_late_ns)}), ${d.refused ?? 0} refused, ${d.leaders} leaders, ${d.lost} lost, last message ${fmtNs(d.last_message_age_ns)} ago` +
    (d.awaiting_echo ? ' — STALE: until the leader echoes its lease (it does not wait for this host yet)' :
     d.stale ? ' — STALE: the leader is silent, or lost' : '') +
    (d.clocks_disagree ? ` — this host's clock is ${fmtNs(d.host_offset_ns)} off the leader's (chrony/PTP; TAI on all hosts or none)` : '');
  const row = el('div', {}, 'hosts: ' + txt +
    (d.udp_drops ? `; ${d.udp_drops} datagrams dropped at full socket buffers` : ''));
  c.hosts.append(row);
  if (d.role === 'leader') {
    // Two-phase commit: who must acknowledge each change, and how fast.
    const fs = d.followers || [];
    c.hosts.append(el('div', {class: 'followers'},
      `${fs.length} follower${fs.length === 1 ? '' : 's'} acknowledging; Lead now ${fmtNs(d.lead_current_ns ?? 0)}, ` +
      `ack p50 ${fmtNs(d.ack_p50_ns ?? 0)} p99 ${fmtNs(d.ack_p99_ns ?? 0)}, command to commit p99 ${fmtNs(d.commit_p99_ns ?? 0)}, ` +
      `${d.postponed ?? 0} postponed, ${d.lost_followers ?? 0} lost, ${d.asked_aside ?? 0} asked aside` +
      (d.slowest ? ` — every change waits for ${d.slowest}, the last to hold most of them` : '')));
    for (const f of fs)
      c.hosts.append(el('div', {class: 'follower'},
        `· ${f.id}: acknowledged change ${f.acked}, heard commits to ${f.committed}, last ack ${fmtNs(f.last_ack_ns)}, heard ${fmtNs(f.last_heard_ns)} ago; ` +
        `${f.late_changes ?? 0} late, ${f.refused ?? 0} refused, ${f.holds ?? 0} held; ` +
        `the last to hold ${f.slowest ?? 0} of the last 32 changes`));
  } else if (d.holds) {
    c.hosts.append(el('div', {}, `${d.holds} instants held for a commit, ${d.hold_stales ?? 0} of them long enough to mark the clock stale`));
  }
  if (d.conflict) {
    c.hosts.append(el('div', {class: 'conflict'},
      `CONFLICT: another live leader publishes '${d.clock}'` + (d.conflict_with ? ` (${d.conflict_with}, term ${d.conflict_term})` : '')));
  }
}

function update(frame) {
  if (frame.control !== undefined && frame.control !== control) {
    control = frame.control;
    document.getElementById('tokenform').hidden = !control;
    for (const c of cards.values()) c.controls.hidden = !control;
  }
  for (const k of frame.clocks) {
    if (only !== null && k.name !== only) continue;
    const c = cards.get(k.name) || card(k.name);
    c.controls.hidden = !control;
    c.state.textContent = k.state;
    c.state.className = 'state ' + k.state;
    c.sim.textContent = k.sim ?? (k.error || '–');
    c.world.textContent = k.world ? 'world ' + k.world : '';
    c.fact.scale.textContent = k.scale ?? '–';
    c.fact.rtf.textContent = k.rtf !== undefined ? k.rtf.toPrecision(4) : '–';
    c.fact.source.textContent = k.source ?? '–';
    c.fact.epoch.textContent = k.jump_epoch ?? '–';
    c.fact.pid.textContent = k.writer_pid !== undefined ? 'pid ' + k.writer_pid : '–';
    c.err.textContent = k.status_error || k.error || '';
    if (k.history) {
      c.history = k.history;
      plotLine(c.rtfPlot, c.history);
    }
    const st = k.status;
    if (st) {
      c.fact.commits.textContent = st.commits;
      if (st.ticks) {
        c.fact.ticks.textContent = st.ticks.count;
        c.fact.late.textContent = fmtNs(st.ticks.late_p99_ns);
        plotHist(c.histPlot, st.ticks.late_hist);
      }
      lockstep(c, st.lockstep, k.name);
      hosts(c, st.distribute);
    }
  }
}

function connect() {
  const link = document.getElementById('link');
  const es = new EventSource('/events');
  es.onopen = () => { link.textContent = 'live'; link.className = 'link up'; };
  es.onerror = () => { link.textContent = 'reconnecting'; link.className = 'link down'; };
  es.onmessage = (e) => update(JSON.parse(e.data));
}

connect();
