// The lab's latency: a TCP proxy run inside a host, in front of one of its ports. Connections
// from other hosts are redirected to it (nftables, prerouting), and it holds every chunk, each
// way, for DELAY ms ± JITTER before passing it on, in order.
//   node delay-proxy.mjs LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS JITTER_MS
import { connect, createServer } from "node:net";

const [listenPort, targetHost, targetPort, delayMs, jitterMs] = process.argv.slice(2);
const delay = Number(delayMs);
const jitter = Number(jitterMs);

/** Writes each chunk after its delay, never before the one ahead of it. */
function delayed(from, to) {
  let last = 0;
  from.on("data", (chunk) => {
    const at = Math.max(last, Date.now() + delay + (Math.random() * 2 - 1) * jitter);
    last = at;
    setTimeout(() => to.writable && to.write(chunk), at - Date.now());
  });
  from.on("end", () => setTimeout(() => to.end(), Math.max(0, last - Date.now())));
}

const server = createServer((client) => {
  const upstream = connect(Number(targetPort), targetHost);
  delayed(client, upstream);
  delayed(upstream, client);
  const end = () => (client.destroy(), upstream.destroy());
  client.on("error", end);
  upstream.on("error", end);
});
server.listen(Number(listenPort), "0.0.0.0", () => process.stdout.write("ready\n"));
