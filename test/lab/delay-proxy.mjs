// The lab's latency: a TCP proxy run inside a host, in front of one of its ports. Connections
// from other hosts are redirected to it (nftables, prerouting), and it holds every chunk, each
// way, for DELAY ms ± JITTER before passing it on, in order.
//   node delay-proxy.mjs LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS JITTER_MS
import { connect, createServer } from "node:net";

const [listenPort, targetHost, targetPort, delayMs, jitterMs] = process.argv.slice(2);
const delay = Number(delayMs);
const jitter = Number(jitterMs);

/**
 * Writes each chunk after its delay, never before the one ahead of it, and ends `to` after the
 * last one: one queue, one timer for its head (two timers due in the same millisecond may fire
 * in either order, and an end passed on before the last write loses that write).
 */
function delayed(from, to) {
  const queue = [];
  let timer = null;
  let ended = false;
  let last = 0;
  const pump = () => {
    timer = null;
    while (queue.length && queue[0].at <= Date.now()) {
      const { chunk } = queue.shift();
      if (to.writable) to.write(chunk);
    }
    if (queue.length) timer = setTimeout(pump, queue[0].at - Date.now());
    else if (ended) to.end();
  };
  from.on("data", (chunk) => {
    last = Math.max(last, Date.now() + delay + (Math.random() * 2 - 1) * jitter);
    queue.push({ at: last, chunk });
    timer ??= setTimeout(pump, last - Date.now());
  });
  from.on("end", () => {
    ended = true;
    if (!timer) pump();
  });
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
