// Distinct free loopback ports for tests and benchmarks: held open together while picking, so
// that no two are the same, and never one this process was given before. A port found free is
// free only for a moment: a member added under it but never started, or one that stopped, leaves
// it free for the kernel to hand out again, and etcd refuses a peer URL it removed within the
// same second ("member not found"). Other processes may still be given it; nothing here can say.
import { createServer } from "node:net";

/** Every port this process was given. */
const given = new Set();

/** @returns {Promise<import("node:net").Server>} */
function listenOnAnyPort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => ok(server));
  });
}

/** @param {import("node:net").Server} server */
function portOf(server) {
  const a = server.address();
  return typeof a === "object" && a ? a.port : 0;
}

/** @param {number} count @returns {Promise<number[]>} */
export async function freePorts(count) {
  const held = [];
  const ports = [];
  try {
    // Ports given before stay held until the end too, so the kernel offers another each time.
    for (let tries = 0; ports.length < count; tries++) {
      if (tries >= count + 1_000) throw new Error(`no ${count} free loopback ports that this process was not given before`);
      const server = await listenOnAnyPort();
      held.push(server);
      const port = portOf(server);
      if (port !== 0 && !given.has(port)) ports.push(port);
    }
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
  for (const port of ports) given.add(port);
  return ports;
}
