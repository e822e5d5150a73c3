/**
 * The console's script, served as `/console/app.js` (an ES module; no build step, no framework).
 * It is kept as text here so that the Worker serves it without a bundler rule; the browser tests
 * load it in Chromium, and a unit test parses it.
 *
 * Live updates cost one held request: the audit log's long poll (`audit?after=N&wait=25`). Every
 * state change appends an audit entry, which wakes that request; the page then re-reads status,
 * tickets and enrollment tokens once (coalesced), and counts time down locally in between.
 * The text below must contain no backtick and no dollar-brace (it is a raw template string).
 * @module
 */
export const CONSOLE_JS = String.raw`// etcd join broker: operator console
const TOKEN_KEY = 'joinBroker.adminToken';
const CLUSTERS_KEY = 'joinBroker.clusters';
const AUDIT_KEEP = 200;
const TIMELINE_ROWS = 14;
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

/** An element with attributes (on* are listeners, class/text shorthands) and children. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  return fill(el, attrs, children);
}
function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}
function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

// ------------------------------------------------------------------ formatting

function duration(ms) {
  if (!(ms >= 0)) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + String(s % 60).padStart(2, '0') + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + String(Math.floor(s / 60) % 60).padStart(2, '0') + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor(s / 3600) % 24 + ' h';
}
function clock(ms) {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}
function when(iso) {
  if (!iso) return '—';
  const t = Date.parse(iso);
  const age = Date.now() - t;
  return age < 86400000 ? clock(t) : new Date(t).toISOString().slice(0, 16).replace('T', ' ');
}
/** etcd member IDs as etcdctl prints them (hex); the broker stores what the node reported. */
function memberHex(id) {
  if (!id) return '—';
  try {
    return /^[0-9]+$/.test(id) ? BigInt(id).toString(16) : id.toLowerCase();
  } catch {
    return id;
  }
}
function ms(iso) {
  return iso ? Date.parse(iso) : null;
}

// ------------------------------------------------------------------ API

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && problem.detail) || 'HTTP ' + status);
    this.status = status;
    this.code = (problem && problem.code) || 'http_' + status;
  }
}

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  cluster: '',
  generation: 0,
  abort: null,
  status: null,
  tickets: [],
  tokens: [],
  audit: [],
  next: 0,
  refreshing: false,
  dirty: false,
  /** Signed in with a read-only credential: the write controls are hidden. */
  readOnly: false,
};

function base() {
  return '/v1/admin/clusters/' + encodeURIComponent(state.cluster);
}

async function api(method, path, body, signal) {
  const headers = { authorization: 'Bearer ' + state.token, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, cache: 'no-store' });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'network', detail: 'the broker did not answer (' + (e && e.message) + ')' });
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(res.status, data || { detail: text.slice(0, 200) });
  return data;
}

/** What an operator should read for a failed call. */
function explain(e) {
  if (!(e instanceof ApiError)) return { title: 'Unexpected error', detail: String(e && e.message || e) };
  if (e.status === 401) return { title: 'Wrong admin token', detail: 'The broker refused this admin token (401): ' + e.message + '. Paste the ADMIN_TOKEN secret this broker was deployed with.' };
  if (e.status === 403) return { title: 'Not allowed (403)', detail: 'The broker refused this with a read-only credential: ' + e.message + '. Sign in with the ADMIN_TOKEN to change anything.' };
  if (e.status === 429) return { title: 'Too many failed attempts', detail: 'This address made too many failed attempts; wait a minute before trying again.' };
  if (e.code === 'unknown_cluster') return { title: 'Unknown cluster', detail: 'This broker has no cluster named "' + state.cluster + '". A cluster exists once it has an enrollment token or was adopted.' };
  if (e.status === 0) return { title: 'Broker unreachable', detail: e.message };
  return { title: 'Request failed (' + e.status + ' ' + e.code + ')', detail: e.message };
}

// ------------------------------------------------------------------ messages

function showError(e) {
  const box = $('error');
  const { title, detail } = explain(e);
  box.replaceChildren(h('strong', { text: title }), h('span', { text: detail }));
  box.hidden = false;
}
function clearError() {
  $('error').hidden = true;
}
function connection(text, kind) {
  const el = $('connection');
  el.textContent = text;
  el.className = 'connection' + (kind ? ' ' + kind : '');
}

// ------------------------------------------------------------------ confirmation

function confirmAction({ title, text, ok, reason }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = ok;
  $('confirm-reason-row').hidden = !reason;
  $('confirm-reason').value = reason || '';
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok' ? $('confirm-reason').value.trim() || reason || 'confirmed' : null), { once: true });
    dialog.showModal();
    (reason ? $('confirm-reason') : $('confirm-cancel')).focus();
  });
}

// ------------------------------------------------------------------ sign in, cluster choice

function knownClusters() {
  try {
    return JSON.parse(localStorage.getItem(CLUSTERS_KEY) || '[]').filter((c) => typeof c === 'string');
  } catch {
    return [];
  }
}
function rememberCluster(name) {
  const list = [name, ...knownClusters().filter((c) => c !== name)].slice(0, 20);
  localStorage.setItem(CLUSTERS_KEY, JSON.stringify(list));
  renderKnownClusters(list);
}
function renderKnownClusters(list) {
  $('known-clusters').replaceChildren(...list.map((c) => h('option', { value: c })));
}
/** The broker's own list of clusters (admin clusters), merged into the picker and the switcher. */
async function loadClusterList() {
  let listed = [];
  try {
    listed = (await api('GET', '/v1/admin/clusters')).clusters.map((c) => c.name);
  } catch {
    return;
  }
  const all = [...new Set([...listed, ...knownClusters()])].sort();
  renderKnownClusters(all);
  const switcher = $('switch-cluster');
  switcher.replaceChildren(...all.map((c) => h('option', { value: c, text: c, selected: c === state.cluster })));
  switcher.hidden = all.length < 2;
}

/** The cluster the link names ('#cluster=NAME'): '' when none, null when it cannot be decoded. */
function clusterFromHash() {
  const m = /(?:^#|&)cluster=([^&]*)/.exec(location.hash);
  if (!m) return '';
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}
/** Says that the address names no cluster it can read: in the sign-in form, or, when a cluster is open, in the status line. */
function badLink() {
  if (!$('dashboard').hidden) return connection('Malformed link (its "#cluster=" is not valid percent-encoding): still showing ' + state.cluster, 'trouble');
  const box = $('error');
  box.replaceChildren(h('strong', { text: 'Malformed link' }), h('span', { text: 'The "#cluster=" part of this address is not valid percent-encoding. Type the cluster\'s name below.' }));
  box.hidden = false;
}

function stop() {
  state.generation++;
  if (state.abort) state.abort.abort();
  state.abort = null;
}

function signOut(message) {
  stop();
  $('dashboard').hidden = true;
  $('signin').hidden = false;
  $('signout').hidden = !state.token;
  connection(message || 'Signed out');
}

async function open(cluster) {
  stop();
  const generation = state.generation;
  const abort = new AbortController();
  state.abort = abort;
  state.cluster = cluster;
  state.audit = [];
  state.next = 0;
  clearError();
  connection('Connecting to ' + cluster + '…');
  try {
    state.readOnly = (await api('GET', '/v1/admin/whoami', undefined, abort.signal)).readOnly === true;
    // Audit first: every change after this read wakes the follow below.
    await loadAudit(abort.signal);
    await refresh(generation, abort.signal);
  } catch (e) {
    if (e && e.name === 'AbortError') return;
    signOut('Not connected');
    showError(e);
    if (e.status === 401) $('token').focus();
    return;
  }
  if (generation !== state.generation) return;
  sessionStorage.setItem(TOKEN_KEY, state.token);
  rememberCluster(cluster);
  if (clusterFromHash() !== cluster) history.replaceState(null, '', '#cluster=' + encodeURIComponent(cluster));
  document.title = cluster + ' · Join broker console';
  $('signin').hidden = true;
  $('dashboard').hidden = false;
  $('signout').hidden = false;
  $('cluster-name').textContent = cluster;
  document.body.classList.toggle('read-only', state.readOnly);
  $('read-only').hidden = !state.readOnly;
  // Drawn again now that the dashboard has its size (the timeline fits its width).
  render();
  renderAudit([]);
  $('main').focus({ preventScroll: true });
  follow(generation, abort.signal);
  loadClusterList();
}

async function loadAudit(signal) {
  for (;;) {
    const page = await api('GET', base() + '/audit?limit=1000&after=' + state.next, undefined, signal);
    state.audit = state.audit.concat(page.entries).slice(-AUDIT_KEEP);
    state.next = page.next;
    if (page.entries.length < 1000) return;
  }
}

async function loadTickets(signal) {
  const all = [];
  let after = 0;
  for (;;) {
    const page = await api('GET', base() + '/tickets?limit=1000&after=' + after, undefined, signal);
    all.push(...page.tickets);
    if (page.next === null || page.next === undefined) return all;
    after = page.next;
  }
}

async function refresh(generation, signal) {
  const [status, tickets, tokens] = await Promise.all([
    api('GET', base(), undefined, signal),
    loadTickets(signal),
    api('GET', base() + '/enrollment-tokens', undefined, signal),
  ]);
  if (generation !== state.generation) return;
  state.status = status;
  state.tickets = tickets;
  state.tokens = tokens.tokens;
  if (!$('dashboard').hidden) render();
}

/** One refresh at a time; changes that arrive meanwhile cause exactly one more. */
async function scheduleRefresh(generation, signal) {
  if (state.refreshing) {
    state.dirty = true;
    return;
  }
  state.refreshing = true;
  try {
    do {
      state.dirty = false;
      await refresh(generation, signal);
      await new Promise((r) => setTimeout(r, 200));
    } while (state.dirty && generation === state.generation);
  } catch (e) {
    if (!(e && e.name === 'AbortError') && generation === state.generation) connection('Refresh failed: ' + explain(e).detail, 'trouble');
  } finally {
    state.refreshing = false;
  }
}

/** The audit log's long poll: one request held at a time, answered at the next state change. */
async function follow(generation, signal) {
  let delay = 1000;
  connection('Live', 'live');
  while (generation === state.generation) {
    try {
      const page = await api('GET', base() + '/audit?limit=500&wait=25&after=' + state.next, undefined, signal);
      if (generation !== state.generation) return;
      state.next = page.next;
      delay = 1000;
      connection('Live', 'live');
      if (page.entries.length) {
        state.audit = state.audit.concat(page.entries).slice(-AUDIT_KEEP);
        renderAudit(page.entries.map((e) => e.seq));
        scheduleRefresh(generation, signal);
      }
    } catch (e) {
      if ((e && e.name === 'AbortError') || generation !== state.generation) return;
      if (e.status === 401 || e.status === 404 || e.status === 429) {
        signOut('Not connected');
        showError(e);
        return;
      }
      connection('Reconnecting in ' + Math.round(delay / 1000) + ' s (' + explain(e).detail + ')', 'trouble');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }
}

// ------------------------------------------------------------------ actions

async function act(button, fn, done) {
  button.disabled = true;
  try {
    const result = await fn();
    if (done) done(result);
    scheduleRefresh(state.generation, state.abort && state.abort.signal);
  } catch (e) {
    if (!(e && e.name === 'AbortError')) window.alert(explain(e).title + ': ' + explain(e).detail);
  } finally {
    button.disabled = false;
  }
}

async function revokeAdmission(ticket, button) {
  const reason = await confirmAction({
    title: 'Revoke the admission of ' + ticket.node + '?',
    text: 'Its admission token stops being valid at once, its ticket ends as revoked and the slot goes to the next node. The node must ask again to rejoin.',
    ok: 'Revoke admission',
    reason: 'revoked from the console',
  });
  if (reason === null) return;
  await act(button, () => api('POST', base() + '/admissions/' + encodeURIComponent(ticket.jti) + '/revoke', { reason }), () => connection('Revoked the admission of ' + ticket.node, 'live'));
}

async function togglePause(button) {
  const paused = state.status && state.status.paused;
  const ok = await confirmAction(paused
    ? { title: 'Resume admissions?', text: 'The next queued node is admitted at once if a slot is free.', ok: 'Resume' }
    : { title: 'Pause admissions?', text: 'Nodes keep their place in the queue, and admitted nodes keep their slot, but no further node is admitted until you resume.', ok: 'Pause' });
  if (ok === null) return;
  await act(button, () => api('POST', base() + (paused ? '/resume' : '/pause'), undefined));
}

async function revokeToken(token, button) {
  const ok = await confirmAction({
    title: 'Revoke enrollment token ' + token.id + '?',
    text: 'Nodes can no longer take tickets with it. Tickets it already issued are not affected.',
    ok: 'Revoke token',
  });
  if (ok === null) return;
  await act(button, () => api('DELETE', base() + '/enrollment-tokens/' + encodeURIComponent(token.id), undefined));
}

async function createToken(event) {
  event.preventDefault();
  const body = {};
  const description = $('token-description').value.trim();
  // 24 h unless changed; a token that never expires is asked for, never a default.
  const forever = $('token-no-expiry').checked;
  const hours = forever ? '' : $('token-ttl').value.trim() || '24';
  const uses = $('token-uses').value.trim();
  if (description) body.description = description;
  if (hours) body.ttlSeconds = Math.round(Number(hours) * 3600);
  if (uses) body.maxUses = Number(uses);
  const summary = (description ? '"' + description + '", ' : '') + (forever ? 'never expires' : 'valid for ' + hours + ' h') + ', ' + (uses ? uses + ' use(s)' : 'unlimited uses');
  const ok = await confirmAction({ title: 'Create an enrollment token?', text: 'A new token for cluster ' + state.cluster + ': ' + summary + '. It is shown once.', ok: 'Create token' });
  if (ok === null) return;
  const button = event.submitter || $('token-form').querySelector('button');
  await act(button, () => api('POST', base() + '/enrollment-tokens', body), (created) => {
    $('new-token').hidden = false;
    $('new-token-value').value = created.token;
    $('new-token-value').focus();
    $('new-token-value').select();
    $('token-form').reset();
    $('token-ttl').disabled = false;
  });
}

// ------------------------------------------------------------------ rendering

/** Re-renders keep keyboard focus on the same control (by its data-key). */
function keepFocus(fn) {
  const key = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.key : undefined;
  fn();
  if (key) {
    const again = document.querySelector('[data-key="' + CSS.escape(key) + '"]');
    if (again) again.focus();
  }
}

function render() {
  keepFocus(() => {
    renderSummary();
    renderQueue();
    renderMembers();
    renderTokens();
  });
  renderTimeline();
  tick();
}

function fact(label, value, title) {
  return h('div', {}, h('dt', { text: label }), h('dd', { text: value, title }));
}

function renderSummary() {
  const s = state.status;
  const badge = $('state-badge');
  badge.textContent = s.paused ? 'paused' : 'admitting';
  badge.className = 'badge' + (s.paused ? ' paused' : '');
  const pause = $('pause');
  pause.textContent = s.paused ? 'Resume admissions' : 'Pause admissions';
  const live = state.tickets.filter((t) => t.state === 'queued' || t.state === 'admitted');
  const waitingForBootstrap = !s.bootstrapped && !s.adopted && s.bootstrapNode;
  $('facts').replaceChildren(
    fact('Bootstrap', s.adopted ? 'adopted cluster' : s.bootstrapped ? 'done by ' + s.bootstrapNode : waitingForBootstrap ? 'waiting for ' + s.bootstrapNode : 'not yet'),
    fact('Queued', String(s.queue.queued)),
    fact('Admitted', s.queue.admitted + ' of ' + s.policy.maxInFlight),
    fact('Members', String(s.members.length)),
    fact('Typical admission', s.typicalAdmissionSeconds ? s.typicalAdmissionSeconds + ' s' : '—'),
    fact('Live tickets', String(live.length)),
    fact('Issuer', s.issuer),
    fact('Signing key', s.signingKey ? s.signingKey.slice(0, 12) + '…' : '—', s.signingKey || undefined),
  );
  const policy = s.policy;
  $('policy').replaceChildren(
    fact('Nodes admitted at once', String(policy.maxInFlight)),
    fact('Lease', policy.leaseSeconds + ' s'),
    fact('Admission token lifetime', policy.admissionTtlSeconds + ' s'),
    fact('Queue limit', String(policy.maxQueue)),
  );
}

function renderQueue() {
  const admitted = state.tickets.filter((t) => t.state === 'admitted');
  const queued = state.tickets.filter((t) => t.state === 'queued');
  const rows = [];
  admitted.forEach((t) => rows.push(queueRow(t, '▶')));
  queued.forEach((t, i) => rows.push(queueRow(t, String(i + 1))));
  $('queue').tBodies[0].replaceChildren(...rows);
  $('queue-empty').hidden = rows.length > 0;
  $('queue').hidden = rows.length === 0;
}

function queueRow(t, position) {
  const revoke = t.state === 'admitted' && t.jti
    ? h('button', { type: 'button', class: 'action write', 'data-key': 'revoke:' + t.ticket, 'aria-label': 'Revoke the admission of ' + t.node, text: 'Revoke', onclick: (e) => revokeAdmission(t, e.currentTarget) })
    : null;
  return h('tr', { class: t.state, 'data-ticket': t.ticket, 'data-node': t.node },
    h('td', { class: 'num', text: position, title: t.state === 'admitted' ? 'holds a slot' : 'position in the queue' }),
    h('td', { class: 'mono', text: t.node, title: t.peerURL }),
    h('td', {}, h('span', { class: 'state ' + t.state, text: t.state })),
    h('td', { text: t.role }),
    h('td', { class: 'num waited', 'data-created': t.createdAt, 'data-admitted': t.admittedAt || '' }),
    h('td', { class: 'num lease', 'data-lease': t.leaseExpiresAt || '' }),
    h('td', {}, revoke));
}

function renderMembers() {
  const s = state.status;
  const rows = s.members.map((m) => h('tr', {},
    h('td', { class: 'mono', text: m.node }),
    h('td', { text: 'voter (' + m.source + ')' }),
    h('td', { class: 'mono', text: memberHex(m.memberID), title: m.memberID ? 'decimal ' + m.memberID : undefined }),
    h('td', { class: 'mono', text: m.peerURL }),
    h('td', { text: when(m.joinedAt) })));
  for (const t of s.inFlight) {
    rows.push(h('tr', {},
      h('td', { class: 'mono', text: t.node }),
      h('td', { text: t.role === 'bootstrap' ? 'bootstrapping' : 'learner (joining)' }),
      h('td', { class: 'mono', text: memberHex(t.memberID) }),
      h('td', { class: 'mono', text: t.peerURL }),
      h('td', { text: 'admitted ' + when(t.admittedAt) })));
  }
  $('members').tBodies[0].replaceChildren(...rows);
  $('members-empty').hidden = rows.length > 0;
  $('members').hidden = rows.length === 0;
}

function renderTokens() {
  const rows = state.tokens.map((t) => h('tr', {},
    h('td', { class: 'mono', text: t.id }),
    h('td', { text: t.description || '—' }),
    h('td', {}, h('span', { class: 'state ' + (t.state === 'active' ? 'joined' : 'revoked'), text: t.state })),
    h('td', { class: 'num', text: t.uses + (t.maxUses ? ' / ' + t.maxUses : '') }),
    h('td', { text: t.expiresAt ? when(t.expiresAt) : 'never' }),
    h('td', {}, t.state === 'active'
      ? h('button', { type: 'button', class: 'action write', 'data-key': 'token:' + t.id, 'aria-label': 'Revoke enrollment token ' + t.id, text: 'Revoke', onclick: (e) => revokeToken(t, e.currentTarget) })
      : null)));
  $('tokens').tBodies[0].replaceChildren(...rows);
}

function describe(entry) {
  const d = entry.detail || {};
  const parts = [];
  if (d.node && d.node !== entry.subject) parts.push(d.node);
  parts.push(entry.subject);
  if (d.role) parts.push(d.role);
  if (d.memberID) parts.push('member ' + memberHex(String(d.memberID)));
  if (d.reason) parts.push('"' + d.reason + '"');
  if (d.previousState) parts.push('was ' + d.previousState);
  parts.push('by ' + entry.actor);
  return parts.join(' · ');
}

function renderAudit(fresh) {
  const list = $('audit');
  const newest = state.audit.slice().reverse();
  list.replaceChildren(...newest.map((e) => h('li', { class: fresh.includes(e.seq) ? 'fresh' : undefined, 'data-seq': e.seq },
    h('time', { datetime: e.time, text: when(e.time), title: e.time }),
    h('span', { class: 'action-name', text: e.action }),
    h('span', { class: 'detail', text: describe(e) }))));
  if (!newest.length) list.append(h('li', { class: 'empty', text: 'Nothing yet.' }));
}

function renderTimeline() {
  const box = $('timeline');
  const tickets = state.tickets.slice(-TIMELINE_ROWS);
  if (!tickets.length) {
    box.replaceChildren(h('p', { class: 'empty', text: 'No ticket yet.' }));
    return;
  }
  const now = Date.now();
  const live = tickets.some((t) => t.state === 'queued' || t.state === 'admitted');
  const start = Math.min(...tickets.map((t) => ms(t.createdAt)));
  const last = Math.max(...tickets.map((t) => ms(t.endedAt) || ms(t.admittedAt) || ms(t.createdAt)));
  const end = Math.max(live ? now : last, start + 1000);
  const width = Math.max(320, Math.round(box.clientWidth || 800));
  const longest = Math.max(...tickets.map((t) => Math.min(18, t.node.length)));
  const label = Math.min(Math.round(width * 0.3), 16 + longest * 7.5);
  const row = 24;
  const top = 8;
  const axis = 22;
  const right = 12;
  const height = top + tickets.length * row + axis;
  const x = (t) => label + ((t - start) / (end - start)) * (width - label - right);
  const chart = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, width, height, role: 'img', 'aria-label': 'Timeline of the last ' + tickets.length + ' tickets: queued, admitted, joined or ended' });
  const ticks = niceTicks(start, end, Math.max(2, Math.floor((width - label) / 90)));
  const axisGroup = svg('g', { class: 'axis' });
  // A label needs about 50 px: ticks whose label would be cut at either edge are left out.
  for (const t of ticks.filter((t) => x(t) >= label + 20 && x(t) <= width - 26)) {
    axisGroup.append(svg('line', { class: 'grid', x1: x(t), x2: x(t), y1: top, y2: top + tickets.length * row }));
    axisGroup.append(svg('text', { x: x(t), y: height - 6, 'text-anchor': 'middle', text: clock(t) }));
  }
  chart.append(axisGroup);
  tickets.forEach((t, i) => {
    const y = top + i * row;
    const created = ms(t.createdAt);
    const admitted = ms(t.admittedAt);
    const ended = ms(t.endedAt);
    const queuedUntil = admitted || ended || now;
    const g = svg('g', { class: 'ticket', 'data-node': t.node });
    const summary = t.node + ' (' + t.role + '): queued ' + clock(created) + (admitted ? ', admitted ' + clock(admitted) : '') + (ended ? ', ' + t.state + ' ' + clock(ended) : ', ' + t.state + ' now');
    g.append(svg('title', { text: summary }));
    g.append(svg('text', { x: 4, y: y + row / 2 + 4, text: t.node.length > 18 ? t.node.slice(0, 17) + '…' : t.node }));
    g.append(svg('rect', { class: 'bar-queued', x: x(created), y: y + 7, width: Math.max(1.5, x(queuedUntil) - x(created)), height: row - 14, rx: 2 }));
    if (admitted) g.append(svg('rect', { class: 'bar-admitted', x: x(admitted), y: y + 5, width: Math.max(2, x(ended || now) - x(admitted)), height: row - 10, rx: 2 }));
    if (ended) g.append(svg('circle', { class: t.state === 'joined' ? 'end-joined' : 'end-ended', cx: x(ended), cy: y + row / 2, r: 5 }));
    chart.append(g);
  });
  if (live) chart.append(svg('line', { class: 'now', x1: x(now), x2: x(now), y1: top - 4, y2: top + tickets.length * row }));
  box.replaceChildren(chart);
}

function niceTicks(start, end, count) {
  const span = end - start;
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);
  const step = steps.find((s) => span / s <= count) || steps[steps.length - 1];
  const out = [];
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) out.push(t);
  return out;
}

/** Once a second: waited times and lease countdowns, from the clock, without asking the broker. */
function tick() {
  if ($('dashboard').hidden) return;
  const now = Date.now();
  for (const cell of document.querySelectorAll('#queue td.waited')) {
    const created = ms(cell.dataset.created);
    const admitted = ms(cell.dataset.admitted);
    cell.textContent = duration((admitted || now) - created);
  }
  for (const cell of document.querySelectorAll('#queue td.lease')) {
    const lease = ms(cell.dataset.lease);
    if (!lease) {
      cell.textContent = '—';
      continue;
    }
    const left = lease - now;
    cell.textContent = left > 0 ? duration(left) + ' left' : 'expiring';
    cell.classList.toggle('lease-low', left < 15000);
  }
  if (state.tickets.some((t) => t.state === 'queued' || t.state === 'admitted')) renderTimeline();
}

// ------------------------------------------------------------------ wiring

function start() {
  // Listeners first: nothing read from the address below can leave the page without them.
  $('signin').addEventListener('submit', (event) => {
    event.preventDefault();
    state.token = $('token').value.trim();
    const cluster = $('cluster').value.trim();
    if (!state.token || !cluster) return;
    open(cluster);
  });
  $('signout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = '';
    $('token').value = '';
    clearError();
    signOut();
    $('token').focus();
  });
  $('pause').addEventListener('click', (e) => togglePause(e.currentTarget));
  $('switch-cluster').addEventListener('change', (e) => {
    location.hash = '#cluster=' + encodeURIComponent(e.currentTarget.value);
  });
  $('token-form').addEventListener('submit', createToken);
  $('token-no-expiry').addEventListener('change', (e) => ($('token-ttl').disabled = e.target.checked));
  $('copy-token').addEventListener('click', async () => {
    const field = $('new-token-value');
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      $('copy-token').textContent = 'Copied';
    } catch {
      $('copy-token').textContent = 'Press Ctrl+C';
    }
  });
  $('hide-token').addEventListener('click', () => {
    $('new-token-value').value = '';
    $('new-token').hidden = true;
    $('copy-token').textContent = 'Copy';
  });
  $('confirm-cancel').addEventListener('click', () => $('confirm').close('cancel'));
  $('confirm-form').addEventListener('submit', (event) => {
    event.preventDefault();
    $('confirm').close('ok');
  });
  window.addEventListener('hashchange', () => {
    const cluster = clusterFromHash();
    if (cluster === null) return badLink();
    $('cluster').value = cluster;
    if (cluster && state.token && cluster !== state.cluster) open(cluster);
  });
  window.addEventListener('resize', () => state.status && renderTimeline());
  setInterval(tick, 1000);

  renderKnownClusters(knownClusters());
  $('token').value = state.token;
  $('signout').hidden = !state.token;
  const fromHash = clusterFromHash();
  if (fromHash === null) badLink();
  if (fromHash) $('cluster').value = fromHash;
  else if (knownClusters()[0]) $('cluster').value = knownClusters()[0];

  if (state.token && fromHash) open(fromHash);
  else (state.token ? $('cluster') : $('token')).focus();
}

start();
`;
