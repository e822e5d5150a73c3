// Free loopback ports for tests and benchmarks, the one way they are picked.
//
// Below the kernel's ephemeral range: a port found by listening on port 0 and closing again is
// the kernel's to hand out to the next listen(0) anywhere (a join API, a restarted wrangler, a
// workerd), or to a connection, before its etcd binds it or while a test counts on nothing
// answering there; ports below that range are never handed out that way. Random within it, and
// never one this process was given before: etcd refuses a peer URL whose member it removed
// within the same second ("member not found"), so a port reused for a later member would do harm.
// And claimed machine-wide (scripts/claims.mjs) until this process ends: test files run at once,
// each in a process of its own, and a port one of them picked is not bound until its etcd starts,
// so being free a moment ago does not keep another process from picking it meanwhile.
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { claim, release } from "./claims.mjs";

const LOW = 10_000;

/** Every port this process was given. */
const given = new Set();

function ephemeralLow() {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768; // not Linux: the usual default
  }
}

/** @param {number} port @returns {Promise<boolean>} */
function canListen(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * `count` distinct loopback ports, free a moment ago, that this process was not given before and
 * no other live process on the machine was given by this function.
 * @param {number} count @returns {Promise<number[]>}
 */
export async function freePorts(count) {
  const high = Math.max(LOW + 2_000, ephemeralLow());
  const picked = [];
  for (let attempt = 0; picked.length < count; attempt++) {
    if (attempt >= count * 100) throw new Error(`found only ${picked.length} of ${count} free ports between ${LOW} and ${high}`);
    const port = LOW + Math.floor(Math.random() * (high - LOW));
    if (given.has(port) || !claim("ports", port)) continue;
    // Given before the wait: a call running beside this one in the same process (the claim is
    // this process's for both) must not take the port too, nor release the claim under it.
    given.add(port);
    if (!(await canListen(port))) {
      release("ports", port);
      continue;
    }
    picked.push(port);
  }
  return picked;
}
