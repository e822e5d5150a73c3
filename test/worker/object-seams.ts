/**
 * The cluster object's test seams, reached inside workerd (not over HTTP): its clock, and the
 * long polls it holds. Expiry is shown by moving the clock, and a held poll is known to be held
 * before the change that should answer it, rather than slept for.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { vi } from "vitest";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";

export const stub = (cluster: string) => env.JOIN_QUEUE.getByName(cluster) as DurableObjectStub<JoinQueue>;

/** Moves the cluster object's clock forward. */
export const advance = (cluster: string, ms: number) => runInDurableObject(stub(cluster), (q: JoinQueue) => q.clock.advance(ms));

/** Sets the cluster object's clock to `ms` (epoch milliseconds), wherever real time has got to. */
export const advanceTo = (cluster: string, ms: number) => runInDurableObject(stub(cluster), (q: JoinQueue) => q.clock.advance(ms - q.clock.now()));

/** Resolves once the cluster object holds at least `count` long polls. */
export async function pollsHeld(cluster: string, count = 1): Promise<void> {
  await vi.waitUntil(() => runInDurableObject(stub(cluster), (q: JoinQueue) => q.heldPolls >= count), { timeout: 10_000, interval: 20 });
}
