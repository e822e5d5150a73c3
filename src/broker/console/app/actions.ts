/**
 * What an operator changes, each after a confirmation: revoke an admission, pause or resume
 * admissions, revoke or create an enrollment token. A failure is told in an alert; a success
 * refreshes the page.
 * @module
 */
import type { AdminTicket, CreatedEnrollmentToken, EnrollmentToken } from "../../../shared/protocol/wire.ts";
import { api, base, explain, isAbort } from "./api.ts";
import { $ } from "./dom.ts";
import { tokenRequest } from "./format.ts";
import { connection } from "./render.ts";
import { scheduleRefresh } from "./session.ts";
import { state } from "./state.ts";

interface Confirmation {
  title: string;
  text: string;
  ok: string;
  /** Asks for a reason, with this default. */
  reason?: string;
}

/** The confirmation dialog: the reason given (or 'confirmed'), or null when cancelled. */
export function confirmAction({ title, text, ok, reason }: Confirmation): Promise<string | null> {
  const dialog = $<HTMLDialogElement>("confirm");
  const reasonField = $<HTMLInputElement>("confirm-reason");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = ok;
  $("confirm-reason-row").hidden = !reason;
  reasonField.value = reason || "";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" ? reasonField.value.trim() || reason || "confirmed" : null), { once: true });
    dialog.showModal();
    (reason ? reasonField : $("confirm-cancel")).focus();
  });
}

async function act<T>(button: HTMLButtonElement, fn: () => Promise<T>, done?: (result: T) => void): Promise<void> {
  button.disabled = true;
  try {
    const result = await fn();
    if (done) done(result);
    void scheduleRefresh(state.generation, state.abort?.signal);
  } catch (e) {
    if (!isAbort(e)) window.alert(explain(e, state.cluster).title + ": " + explain(e, state.cluster).detail);
  } finally {
    button.disabled = false;
  }
}

export async function revokeAdmission(ticket: AdminTicket, button: HTMLButtonElement): Promise<void> {
  const reason = await confirmAction({
    title: "Revoke the admission of " + ticket.node + "?",
    text: "Its admission token stops being valid at once, its ticket ends as revoked and the slot goes to the next node. The node must ask again to rejoin.",
    ok: "Revoke admission",
    reason: "revoked from the console",
  });
  if (reason === null) return;
  await act(
    button,
    () => api("POST", base() + "/admissions/" + encodeURIComponent(ticket.jti!) + "/revoke", { reason }),
    () => connection("Revoked the admission of " + ticket.node, "live"),
  );
}

export async function togglePause(button: HTMLButtonElement): Promise<void> {
  const paused = state.status?.paused;
  const ok = await confirmAction(
    paused
      ? { title: "Resume admissions?", text: "The next queued node is admitted at once if a slot is free.", ok: "Resume" }
      : {
          title: "Pause admissions?",
          text: "Nodes keep their place in the queue, and admitted nodes keep their slot, but no further node is admitted until you resume.",
          ok: "Pause",
        },
  );
  if (ok === null) return;
  await act(button, () => api("POST", base() + (paused ? "/resume" : "/pause"), undefined));
}

export async function revokeToken(token: EnrollmentToken, button: HTMLButtonElement): Promise<void> {
  const ok = await confirmAction({
    title: "Revoke enrollment token " + token.id + "?",
    text: "Nodes can no longer take tickets with it. Tickets it already issued are not affected.",
    ok: "Revoke token",
  });
  if (ok === null) return;
  await act(button, () => api("DELETE", base() + "/enrollment-tokens/" + encodeURIComponent(token.id), undefined));
}

export async function createToken(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const { body, summary } = tokenRequest({
    description: $<HTMLInputElement>("token-description").value,
    forever: $<HTMLInputElement>("token-no-expiry").checked,
    hours: $<HTMLInputElement>("token-ttl").value,
    uses: $<HTMLInputElement>("token-uses").value,
  });
  const ok = await confirmAction({
    title: "Create an enrollment token?",
    text: "A new token for cluster " + state.cluster + ": " + summary + ". It is shown once.",
    ok: "Create token",
  });
  if (ok === null) return;
  const form = $<HTMLFormElement>("token-form");
  const button = (event.submitter as HTMLButtonElement | null) || form.querySelector("button")!;
  await act(
    button,
    () => api<CreatedEnrollmentToken>("POST", base() + "/enrollment-tokens", body),
    (created) => {
      const value = $<HTMLInputElement>("new-token-value");
      $("new-token").hidden = false;
      value.value = created.token;
      value.focus();
      value.select();
      form.reset();
      $<HTMLInputElement>("token-ttl").disabled = false;
    },
  );
}
