/**
 * The console's script, served as `/console/app.js` (bundled from these modules by
 * scripts/build-console.mjs): wires the page's controls, then opens the cluster the link names
 * when this tab already holds a token.
 * @module
 */
import { createToken, revokeAdmission, revokeToken, togglePause } from "./actions.ts";
import { $ } from "./dom.ts";
import { clusterHash } from "./format.ts";
import { bindRowActions, clearError, renderKnownClusters, renderTimeline, tick } from "./render.ts";
import { badLink, knownClusters, linkedCluster, open, signOut } from "./session.ts";
import { state, TOKEN_KEY } from "./state.ts";

function start(): void {
  state.token = sessionStorage.getItem(TOKEN_KEY) || "";
  bindRowActions({ revokeAdmission, revokeToken });
  const tokenField = $<HTMLInputElement>("token");
  const clusterField = $<HTMLInputElement>("cluster");
  // Listeners first: nothing read from the address below can leave the page without them.
  $("signin").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = tokenField.value.trim();
    const cluster = clusterField.value.trim();
    if (!state.token || !cluster) return;
    void open(cluster);
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = "";
    tokenField.value = "";
    clearError();
    signOut();
    tokenField.focus();
  });
  $("pause").addEventListener("click", (e) => void togglePause(e.currentTarget as HTMLButtonElement));
  $("switch-cluster").addEventListener("change", (e) => {
    location.hash = clusterHash((e.currentTarget as HTMLSelectElement).value);
  });
  $("token-form").addEventListener("submit", (e) => void createToken(e as SubmitEvent));
  $("token-no-expiry").addEventListener("change", (e) => ($<HTMLInputElement>("token-ttl").disabled = (e.target as HTMLInputElement).checked));
  const copy = $("copy-token");
  copy.addEventListener("click", async () => {
    const field = $<HTMLInputElement>("new-token-value");
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Press Ctrl+C";
    }
  });
  $("hide-token").addEventListener("click", () => {
    $<HTMLInputElement>("new-token-value").value = "";
    $("new-token").hidden = true;
    copy.textContent = "Copy";
  });
  const dialog = $<HTMLDialogElement>("confirm");
  $("confirm-cancel").addEventListener("click", () => dialog.close("cancel"));
  $("confirm-form").addEventListener("submit", (event) => {
    event.preventDefault();
    dialog.close("ok");
  });
  window.addEventListener("hashchange", () => {
    const cluster = linkedCluster();
    if (cluster === null) return badLink();
    clusterField.value = cluster;
    if (cluster && state.token && cluster !== state.cluster) void open(cluster);
  });
  window.addEventListener("resize", () => state.status && renderTimeline());
  setInterval(tick, 1000);

  renderKnownClusters(knownClusters());
  tokenField.value = state.token;
  $("signout").hidden = !state.token;
  const fromHash = linkedCluster();
  if (fromHash === null) badLink();
  if (fromHash) clusterField.value = fromHash;
  else if (knownClusters()[0]) clusterField.value = knownClusters()[0];

  if (state.token && fromHash) void open(fromHash);
  else (state.token ? clusterField : tokenField).focus();
}

start();
