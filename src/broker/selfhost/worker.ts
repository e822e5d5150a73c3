/**
 * The Worker as `join-broker serve` runs it on workerd: the production Worker and its JoinQueue
 * class unchanged, with the one binding only Cloudflare provides (`AUTH_FAILURES`, the failed
 * authentication rate limiter) supplied by a local equivalent, and the client address it counts
 * against taken only from where it cannot be forged (see wrap.ts).
 * @module
 */
import worker from "../index.ts";
import { selfHosted } from "./wrap.ts";

export { JoinQueue } from "../index.ts";

export default selfHosted(worker);
