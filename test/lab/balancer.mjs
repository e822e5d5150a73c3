// The lab's load balancer in front of the control plane (kubeadm's controlPlaneEndpoint), as
// HAProxy with an HTTPS health check does it: a TCP proxy on a host of its own that passes each
// connection to a backend whose GET /readyz last answered 200 (round robin), and closes it when
// none does (the client retries). It checks every backend every 500 ms, without a client
// certificate (kube-apiserver lets anyone read /readyz) and without checking the server's. With
// `tcp` a backend is ready while it accepts connections (k0s's join API, which has no /readyz).
//   node balancer.mjs LISTEN_PORT BACKEND_HOST:PORT[,BACKEND_HOST:PORT…] [tcp]
import { request } from "node:https";
import { connect, createServer } from "node:net";

const [listenPort, list, mode = "readyz"] = process.argv.slice(2);
const backends = list.split(",").map((b) => {
  const [host, port] = b.split(":");
  return { host, port: Number(port), ready: false };
});
let next = 0;

function check(b) {
  if (mode === "tcp") {
    const probe = connect(b.port, b.host);
    probe.setTimeout(1_000, () => ((b.ready = false), probe.destroy()));
    probe.once("connect", () => ((b.ready = true), probe.destroy()));
    probe.once("error", () => (b.ready = false));
    return;
  }
  const req = request({ host: b.host, port: b.port, path: "/readyz", rejectUnauthorized: false, timeout: 1_000 }, (res) => {
    b.ready = res.statusCode === 200;
    res.resume();
  });
  req.on("timeout", () => req.destroy());
  req.on("error", () => (b.ready = false));
  req.end();
}
setInterval(() => backends.forEach(check), 500);

const server = createServer((client) => {
  const ready = backends.filter((b) => b.ready);
  if (ready.length === 0) return client.destroy();
  const b = ready[next++ % ready.length];
  const upstream = connect(b.port, b.host);
  client.pipe(upstream).pipe(client);
  const end = () => (client.destroy(), upstream.destroy());
  client.on("error", end);
  upstream.on("error", end);
});
server.listen(Number(listenPort), "0.0.0.0", () => process.stdout.write("ready\n"));
