/**
 * The broker Worker: a thin Hono app in front of one JoinQueue Durable Object per cluster.
 * @module
 */
import { app } from "./app.ts";

export { JoinQueue } from "./queue/join-queue.ts";

export type AppType = typeof app;

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
