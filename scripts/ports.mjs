// Distinct free loopback ports for tests and benchmarks: held open together while picking, so
// that no two are the same.
import { createServer } from "node:net";

/** @param {number} count @returns {Promise<number[]>} */
export async function freePorts(count) {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise((ok, fail) => {
          const server = createServer();
          server.once("error", fail);
          server.listen(0, "127.0.0.1", () => ok(server));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    return typeof a === "object" && a ? a.port : 0;
  });
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}
