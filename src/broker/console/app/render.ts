/**
 * Drawing the state: the summary, queue, members, tokens, audit stream and timeline, the status
 * line and the error box. Buttons in rows call the actions bound by main.ts (so that drawing
 * imports no action).
 * @module
 */
import type { AdminTicket, EnrollmentToken } from "../../../shared/protocol/wire.ts";
import { explain } from "./api.ts";
import { $, h, svg } from "./dom.ts";
import { auditLine, clock, duration, memberHex, ms, niceTicks, when } from "./format.ts";
import { isLive, queueRows, state } from "./state.ts";

const TIMELINE_ROWS = 14;

export interface RowActions {
  revokeAdmission(ticket: AdminTicket, button: HTMLButtonElement): void;
  revokeToken(token: EnrollmentToken, button: HTMLButtonElement): void;
}

let rowActions: RowActions | null = null;

export function bindRowActions(actions: RowActions): void {
  rowActions = actions;
}

// ------------------------------------------------------------------ messages

export function showError(e: unknown): void {
  const { title, detail } = explain(e, state.cluster);
  showProblem(title, detail);
}

export function showProblem(title: string, detail: string): void {
  const box = $("error");
  box.replaceChildren(h("strong", { text: title }), h("span", { text: detail }));
  box.hidden = false;
}

export function clearError(): void {
  $("error").hidden = true;
}

/** The status line at the top: `live` or `trouble` colour its dot. */
export function connection(text: string, kind?: "live" | "trouble"): void {
  const el = $("connection");
  el.textContent = text;
  el.className = "connection" + (kind ? " " + kind : "");
}

export function renderKnownClusters(list: string[]): void {
  $("known-clusters").replaceChildren(...list.map((c) => h("option", { value: c })));
}

// ------------------------------------------------------------------ the dashboard

/** Re-renders keep keyboard focus on the same control (by its data-key). */
function keepFocus(fn: () => void): void {
  const active = document.activeElement as HTMLElement | null;
  const key = active?.dataset ? active.dataset.key : undefined;
  fn();
  if (key) {
    const again = document.querySelector<HTMLElement>('[data-key="' + CSS.escape(key) + '"]');
    if (again) again.focus();
  }
}

export function render(): void {
  keepFocus(() => {
    renderSummary();
    renderQueue();
    renderMembers();
    renderTokens();
  });
  renderTimeline();
  tick();
}

function fact(label: string, value: string, title?: string): HTMLElement {
  return h("div", {}, h("dt", { text: label }), h("dd", { text: value, title }));
}

function renderSummary(): void {
  const s = state.status!;
  const badge = $("state-badge");
  const needs = s.needsOperator;
  badge.textContent = needs ? "needs an operator" : s.paused ? "paused" : "admitting";
  badge.className = "badge" + (s.paused ? " paused" : "");
  $("pause").textContent = s.paused ? "Resume admissions" : "Pause admissions";
  // A member a node could not remove: what to do, in the node's own words, before resuming.
  const notice = $("needs-operator");
  notice.hidden = !needs;
  notice.replaceChildren(
    ...(needs
      ? [
          h("strong", {
            text: "Paused: " + needs.node + " left etcd member " + BigInt(needs.memberID).toString(16) + " that it could not remove (" + needs.at + ").",
          }),
          h("p", { text: needs.detail }),
          h("p", { text: "Remove the member, then resume admissions." }),
        ]
      : []),
  );
  const live = state.tickets.filter(isLive);
  const waitingForBootstrap = !s.bootstrapped && !s.adopted && s.bootstrapNode;
  $("facts").replaceChildren(
    fact(
      "Bootstrap",
      s.adopted ? "adopted cluster" : s.bootstrapped ? "done by " + s.bootstrapNode : waitingForBootstrap ? "waiting for " + s.bootstrapNode : "not yet",
    ),
    fact("Queued", String(s.queue.queued)),
    fact("Admitted", s.queue.admitted + " of " + s.policy.maxInFlight),
    fact("Members", String(s.members.length)),
    fact("Typical admission", s.typicalAdmissionSeconds ? s.typicalAdmissionSeconds + " s" : "—"),
    fact("Live tickets", String(live.length)),
    fact("Issuer", s.issuer),
    fact("Signing key", s.signingKey ? s.signingKey.slice(0, 12) + "…" : "—", s.signingKey || undefined),
  );
  const policy = s.policy;
  $("policy").replaceChildren(
    fact("Nodes admitted at once", String(policy.maxInFlight)),
    fact("Lease", policy.leaseSeconds + " s"),
    fact("Admission token lifetime", policy.admissionTtlSeconds + " s"),
    fact("Queue limit", String(policy.maxQueue)),
  );
}

function renderQueue(): void {
  const rows = queueRows(state.tickets).map(({ ticket, position }) => queueRow(ticket, position));
  const table = $<HTMLTableElement>("queue");
  table.tBodies[0].replaceChildren(...rows);
  $("queue-empty").hidden = rows.length > 0;
  table.hidden = rows.length === 0;
}

/** A row's write action: the one "Revoke" button, keyed so a redraw keeps its focus. */
function revokeButton(key: string, label: string, act: (button: HTMLButtonElement) => void): HTMLButtonElement {
  return h("button", {
    type: "button",
    class: "action write",
    "data-key": key,
    "aria-label": label,
    text: "Revoke",
    onclick: (e: Event) => act(e.currentTarget as HTMLButtonElement),
  });
}

function queueRow(t: AdminTicket, position: string): HTMLTableRowElement {
  const revoke =
    t.state === "admitted" && t.jti
      ? revokeButton("revoke:" + t.ticket, "Revoke the admission of " + t.node, (button) => rowActions?.revokeAdmission(t, button))
      : null;
  return h(
    "tr",
    { class: t.state, "data-ticket": t.ticket, "data-node": t.node },
    h("td", { class: "num", text: position, title: t.state === "admitted" ? "holds a slot" : "position in the queue" }),
    h("td", { class: "mono", text: t.node, title: t.peerURL }),
    h("td", {}, h("span", { class: "state " + t.state, text: t.state })),
    h("td", { text: t.role }),
    h("td", { class: "num waited", "data-created": t.createdAt, "data-admitted": t.admittedAt || "" }),
    h("td", { class: "num lease", "data-lease": t.leaseExpiresAt || "" }),
    h("td", {}, revoke),
  );
}

function renderMembers(): void {
  const s = state.status!;
  const rows = s.members.map((m) =>
    h(
      "tr",
      {},
      h("td", { class: "mono", text: m.node }),
      h("td", { text: "voter (" + m.source + ")" }),
      h("td", { class: "mono", text: memberHex(m.memberID), title: m.memberID ? "decimal " + m.memberID : undefined }),
      h("td", { class: "mono", text: m.peerURL }),
      h("td", { text: when(m.joinedAt) }),
    ),
  );
  for (const t of s.inFlight) {
    rows.push(
      h(
        "tr",
        {},
        h("td", { class: "mono", text: t.node }),
        h("td", { text: t.role === "bootstrap" ? "bootstrapping" : "learner (joining)" }),
        h("td", { class: "mono", text: memberHex(t.memberID) }),
        h("td", { class: "mono", text: t.peerURL }),
        h("td", { text: "admitted " + when(t.admittedAt) }),
      ),
    );
  }
  const table = $<HTMLTableElement>("members");
  table.tBodies[0].replaceChildren(...rows);
  $("members-empty").hidden = rows.length > 0;
  table.hidden = rows.length === 0;
}

function renderTokens(): void {
  const rows = state.tokens.map((t) =>
    h(
      "tr",
      {},
      h("td", { class: "mono", text: t.id }),
      h("td", { text: t.description || "—" }),
      h("td", {}, h("span", { class: "state " + (t.state === "active" ? "joined" : "revoked"), text: t.state })),
      h("td", { class: "num", text: t.uses + (t.maxUses ? " / " + t.maxUses : "") }),
      h("td", { text: t.expiresAt ? when(t.expiresAt) : "never" }),
      h(
        "td",
        {},
        t.state === "active" ? revokeButton("token:" + t.id, "Revoke enrollment token " + t.id, (button) => rowActions?.revokeToken(t, button)) : null,
      ),
    ),
  );
  $<HTMLTableElement>("tokens").tBodies[0].replaceChildren(...rows);
}

/** The audit stream, newest first; `fresh` (seqs) are highlighted. */
export function renderAudit(fresh: number[]): void {
  const list = $("audit");
  const newest = state.audit.slice().reverse();
  list.replaceChildren(
    ...newest.map((e) =>
      h(
        "li",
        { class: fresh.includes(e.seq) ? "fresh" : undefined, "data-seq": e.seq },
        h("time", { datetime: e.time, text: when(e.time), title: e.time }),
        h("span", { class: "action-name", text: e.action }),
        h("span", { class: "detail", text: auditLine(e) }),
      ),
    ),
  );
  if (!newest.length) list.append(h("li", { class: "empty", text: "Nothing yet." }));
}

/** The last tickets as bars over time: queued, admitted, and how each ended. */
export function renderTimeline(): void {
  const box = $("timeline");
  const tickets = state.tickets.slice(-TIMELINE_ROWS);
  if (!tickets.length) {
    box.replaceChildren(h("p", { class: "empty", text: "No ticket yet." }));
    return;
  }
  const now = Date.now();
  const live = tickets.some(isLive);
  const start = Math.min(...tickets.map((t) => ms(t.createdAt)!));
  const last = Math.max(...tickets.map((t) => ms(t.endedAt) || ms(t.admittedAt) || ms(t.createdAt)!));
  const end = Math.max(live ? now : last, start + 1000);
  const width = Math.max(320, Math.round(box.clientWidth || 800));
  const longest = Math.max(...tickets.map((t) => Math.min(18, t.node.length)));
  const label = Math.min(Math.round(width * 0.3), 16 + longest * 7.5);
  const row = 24;
  const top = 8;
  const axis = 22;
  const right = 12;
  const height = top + tickets.length * row + axis;
  const x = (t: number) => label + ((t - start) / (end - start)) * (width - label - right);
  const chart = svg("svg", {
    viewBox: "0 0 " + width + " " + height,
    width,
    height,
    role: "img",
    "aria-label": "Timeline of the last " + tickets.length + " tickets: queued, admitted, joined or ended",
  });
  const ticks = niceTicks(start, end, Math.max(2, Math.floor((width - label) / 90)));
  const axisGroup = svg("g", { class: "axis" });
  // A label needs about 50 px: ticks whose label would be cut at either edge are left out.
  for (const t of ticks.filter((t) => x(t) >= label + 20 && x(t) <= width - 26)) {
    axisGroup.append(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: top, y2: top + tickets.length * row }));
    axisGroup.append(svg("text", { x: x(t), y: height - 6, "text-anchor": "middle", text: clock(t) }));
  }
  chart.append(axisGroup);
  tickets.forEach((t, i) => {
    const y = top + i * row;
    const created = ms(t.createdAt)!;
    const admitted = ms(t.admittedAt);
    const ended = ms(t.endedAt);
    const queuedUntil = admitted || ended || now;
    const g = svg("g", { class: "ticket", "data-node": t.node });
    const summary =
      t.node +
      " (" +
      t.role +
      "): queued " +
      clock(created) +
      (admitted ? ", admitted " + clock(admitted) : "") +
      (ended ? ", " + t.state + " " + clock(ended) : ", " + t.state + " now");
    g.append(svg("title", { text: summary }));
    g.append(svg("text", { x: 4, y: y + row / 2 + 4, text: t.node.length > 18 ? t.node.slice(0, 17) + "…" : t.node }));
    g.append(svg("rect", { class: "bar-queued", x: x(created), y: y + 7, width: Math.max(1.5, x(queuedUntil) - x(created)), height: row - 14, rx: 2 }));
    if (admitted)
      g.append(svg("rect", { class: "bar-admitted", x: x(admitted), y: y + 5, width: Math.max(2, x(ended || now) - x(admitted)), height: row - 10, rx: 2 }));
    if (ended) g.append(svg("circle", { class: t.state === "joined" ? "end-joined" : "end-ended", cx: x(ended), cy: y + row / 2, r: 5 }));
    chart.append(g);
  });
  if (live) chart.append(svg("line", { class: "now", x1: x(now), x2: x(now), y1: top - 4, y2: top + tickets.length * row }));
  box.replaceChildren(chart);
}

/** Once a second: waited times and lease countdowns, from the clock, without asking the broker. */
export function tick(): void {
  if ($("dashboard").hidden) return;
  const now = Date.now();
  for (const cell of document.querySelectorAll<HTMLElement>("#queue td.waited")) {
    const created = ms(cell.dataset.created)!;
    const admitted = ms(cell.dataset.admitted);
    cell.textContent = duration((admitted || now) - created);
  }
  for (const cell of document.querySelectorAll<HTMLElement>("#queue td.lease")) {
    const lease = ms(cell.dataset.lease);
    if (!lease) {
      cell.textContent = "—";
      continue;
    }
    const left = lease - now;
    cell.textContent = left > 0 ? duration(left) + " left" : "expiring";
    cell.classList.toggle("lease-low", left < 15000);
  }
  if (state.tickets.some(isLive)) renderTimeline();
}
