/**
 * The bench Worker (entry.ts) as `join-broker serve` runs a Worker: with the self-hosted
 * AUTH_FAILURES limiter and client-address handling (src/broker/selfhost/wrap.ts).
 * @module
 */
import bench from "./entry.ts";
import { selfHosted } from "../../src/broker/selfhost/wrap.ts";

export { JoinQueue } from "./entry.ts";

export default selfHosted(bench);
