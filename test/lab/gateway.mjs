// The lab's gateway, run inside the probe host: it listens on a Unix socket (a path crosses
// network namespaces, an address does not), reads one line `HOST:PORT` per connection and
// joins the connection to that TCP address on the lab's bridge.
import { rmSync } from "node:fs";
import { connect, createServer } from "node:net";

const socketPath = process.argv[2];
rmSync(socketPath, { force: true });
const server = createServer((client) => {
  let head = Buffer.alloc(0);
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(10);
    if (nl < 0) return;
    client.off("data", onData);
    client.pause();
    const [host, port] = head.subarray(0, nl).toString().split(":");
    const rest = head.subarray(nl + 1);
    const upstream = connect(Number(port), host, () => {
      if (rest.length) upstream.write(rest);
      client.pipe(upstream).pipe(client);
      client.resume();
    });
    // pipe() ends each side when the other ends; an error ends both.
    const end = () => (client.destroy(), upstream.destroy());
    upstream.on("error", end);
    client.on("error", end);
  };
  client.on("data", onData);
  client.once("error", () => client.destroy());
});
server.listen(socketPath, () => process.stdout.write("ready\n"));
