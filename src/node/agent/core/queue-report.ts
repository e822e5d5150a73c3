/**
 * The "queued" progress event, worded from the broker's queued ticket view.
 * @module
 */
import type { QueuedTicket } from "../../../shared/protocol/wire.ts";
import type { Reporter } from "./progress.ts";

/** What a queued ticket view says about the wait (the broker's fields). */
export type QueuedView = Pick<QueuedTicket, "ticket" | "position" | "estimatedWaitSeconds" | "waitingFor" | "bootstrapNode">;

/** The "queued" event: the position, and what the queue waits for when it is not just turns. */
export function reportQueued(r: Reporter, view: QueuedView): void {
  const where = `position ${view.position ?? "?"} in the queue`;
  const message =
    view.waitingFor === "paused"
      ? `${where}; admissions are paused by an admin`
      : view.waitingFor === "bootstrap"
        ? `${where}; waiting for the bootstrap node${view.bootstrapNode ? ` ${view.bootstrapNode}` : ""} to start the cluster`
        : where;
  r.event("queued", message, {
    ticket: view.ticket,
    position: view.position,
    // An estimate made from typical admissions means nothing while the queue is blocked.
    estimatedWaitSeconds: view.waitingFor ? undefined : view.estimatedWaitSeconds,
    waitingFor: view.waitingFor,
    bootstrapNode: view.bootstrapNode,
  });
}
