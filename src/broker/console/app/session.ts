/**
 * Opening a cluster and following it live. Live updates cost one held request: the audit log's
 * long poll (`audit?after=N&wait=25`). Every state change appends an audit entry, which wakes that
 * request; the page then re-reads status, tickets and enrollment tokens once (coalesced), and
 * counts time down locally in between.
 * @module
 */
import type { AuditPage, ClusterStatus, EnrollmentToken } from "../../../shared/protocol/wire.ts";
import { api, ApiError, base, explain, isAbort, loadAudit, loadTickets } from "./api.ts";
import { $, h } from "./dom.ts";
import { clusterFromHash, clusterHash } from "./format.ts";
import { clearError, connection, render, renderAudit, renderKnownClusters, showError, showProblem } from "./render.ts";
import { begin, CLUSTERS_KEY, keepRecent, parseKnown, remember, state, stop, TOKEN_KEY } from "./state.ts";

export function knownClusters(): string[] {
  return parseKnown(localStorage.getItem(CLUSTERS_KEY));
}

function rememberCluster(name: string): void {
  const list = remember(name, knownClusters());
  localStorage.setItem(CLUSTERS_KEY, JSON.stringify(list));
  renderKnownClusters(list);
}

/** The broker's own list of clusters (admin clusters), merged into the picker and the switcher. */
async function loadClusterList(): Promise<void> {
  let listed: string[] = [];
  try {
    listed = (await api<{ clusters: { name: string }[] }>("GET", "/v1/admin/clusters")).clusters.map((c) => c.name);
  } catch {
    return;
  }
  const all = [...new Set([...listed, ...knownClusters()])].sort();
  renderKnownClusters(all);
  const switcher = $<HTMLSelectElement>("switch-cluster");
  switcher.replaceChildren(...all.map((c) => h("option", { value: c, text: c, selected: c === state.cluster })));
  switcher.hidden = all.length < 2;
}

/** The cluster the page's address names: '' when none, null when it cannot be decoded. */
export function linkedCluster(): string | null {
  return clusterFromHash(location.hash);
}

/** Says that the address names no cluster it can read: in the sign-in form, or, when a cluster is open, in the status line. */
export function badLink(): void {
  if (!$("dashboard").hidden) {
    connection('Malformed link (its "#cluster=" is not valid percent-encoding): still showing ' + state.cluster, "trouble");
    return;
  }
  showProblem("Malformed link", 'The "#cluster=" part of this address is not valid percent-encoding. Type the cluster\'s name below.');
}

export function signOut(message?: string): void {
  stop();
  $("dashboard").hidden = true;
  $("signin").hidden = false;
  $("signout").hidden = !state.token;
  connection(message || "Signed out");
}

export async function open(cluster: string): Promise<void> {
  const { generation, abort } = begin(cluster);
  clearError();
  connection("Connecting to " + cluster + "…");
  try {
    state.readOnly = (await api<{ readOnly?: boolean }>("GET", "/v1/admin/whoami", undefined, abort.signal)).readOnly === true;
    // Audit first: every change after this read wakes the follow below.
    await loadAudit(abort.signal);
    await refresh(generation, abort.signal);
  } catch (e) {
    if (isAbort(e)) return;
    signOut("Not connected");
    showError(e);
    if (e instanceof ApiError && e.status === 401) $("token").focus();
    return;
  }
  if (generation !== state.generation) return;
  sessionStorage.setItem(TOKEN_KEY, state.token);
  rememberCluster(cluster);
  if (linkedCluster() !== cluster) history.replaceState(null, "", clusterHash(cluster));
  document.title = cluster + " · Join broker console";
  $("signin").hidden = true;
  $("dashboard").hidden = false;
  $("signout").hidden = false;
  $("cluster-name").textContent = cluster;
  document.body.classList.toggle("read-only", state.readOnly);
  $("read-only").hidden = !state.readOnly;
  // Drawn again now that the dashboard has its size (the timeline fits its width).
  render();
  renderAudit([]);
  $("main").focus({ preventScroll: true });
  void follow(generation, abort.signal);
  void loadClusterList();
}

async function refresh(generation: number, signal: AbortSignal | undefined): Promise<void> {
  const [status, tickets, tokens] = await Promise.all([
    api<ClusterStatus>("GET", base(), undefined, signal),
    loadTickets(signal),
    api<{ tokens: EnrollmentToken[] }>("GET", base() + "/enrollment-tokens", undefined, signal),
  ]);
  if (generation !== state.generation) return;
  state.status = status;
  state.tickets = tickets;
  state.tokens = tokens.tokens;
  if (!$("dashboard").hidden) render();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One refresh at a time; changes that arrive meanwhile cause exactly one more. */
export async function scheduleRefresh(generation: number, signal: AbortSignal | undefined): Promise<void> {
  if (state.refreshing) {
    state.dirty = true;
    return;
  }
  state.refreshing = true;
  try {
    do {
      state.dirty = false;
      await refresh(generation, signal);
      await sleep(200);
    } while (state.dirty && generation === state.generation);
  } catch (e) {
    if (!isAbort(e) && generation === state.generation) connection("Refresh failed: " + explain(e, state.cluster).detail, "trouble");
  } finally {
    state.refreshing = false;
  }
}

/** The audit log's long poll: one request held at a time, answered at the next state change. */
async function follow(generation: number, signal: AbortSignal): Promise<void> {
  let delay = 1000;
  connection("Live", "live");
  while (generation === state.generation) {
    try {
      const page = await api<AuditPage>("GET", base() + "/audit?limit=500&wait=25&after=" + state.next, undefined, signal);
      if (generation !== state.generation) return;
      state.next = page.next;
      delay = 1000;
      connection("Live", "live");
      if (page.entries.length) {
        state.audit = keepRecent(state.audit, page.entries);
        renderAudit(page.entries.map((e) => e.seq));
        void scheduleRefresh(generation, signal);
      }
    } catch (e) {
      if (isAbort(e) || generation !== state.generation) return;
      if (e instanceof ApiError && (e.status === 401 || e.status === 404 || e.status === 429)) {
        signOut("Not connected");
        showError(e);
        return;
      }
      connection("Reconnecting in " + Math.round(delay / 1000) + " s (" + explain(e, state.cluster).detail + ")", "trouble");
      await sleep(delay);
      delay = Math.min(delay * 2, 10000);
    }
  }
}
