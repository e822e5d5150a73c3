// `npm run dev [-- --port N] [-- --ip ADDR] [wrangler dev flags…]`: the broker under `wrangler dev`
// on 127.0.0.1:8787 (or the port given, or $PORT) with local Durable Object storage. On first run
// it writes .dev.vars with a random ADMIN_TOKEN and says how to use it. The admission tokens' issuer
// follows the address served, so a cluster created on one port keeps working on another. The
// console's script is bundled first (scripts/build-console.mjs), so that an edit of it is served.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const USAGE = `Usage: npm run dev [-- --port N] [-- --ip ADDR] [other wrangler dev flags]

Starts the broker under wrangler dev with local Durable Object storage (.wrangler/state).
  --port N     listen on port N (default: $PORT, else 8787)
  --ip ADDR    listen on ADDR (default 127.0.0.1)
Other flags are passed to wrangler dev as they are (for example --persist-to DIR).`;

/** Our flags out of argv; everything else goes to wrangler as given. */
function parse(argv) {
  const out = { port: process.env.PORT ?? "8787", ip: "127.0.0.1", rest: [], help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--(port|ip)(?:=(.*))?$/.exec(arg);
    if (arg === "--help" || arg === "-h") out.help = true;
    else if (m) {
      const value = m[2] ?? argv[++i];
      if (value === undefined || value.startsWith("--")) fail(`--${m[1]} needs a value`);
      out[m[1]] = value;
    } else out.rest.push(arg);
  }
  if (!/^\d+$/.test(out.port) || Number(out.port) < 1 || Number(out.port) > 65535) fail(`--port ${JSON.stringify(out.port)} must be a port number, 1-65535`);
  return out;
}

function fail(message) {
  console.error(`npm run dev: ${message}\n\n${USAGE}`);
  process.exit(2);
}

const args = parse(process.argv.slice(2));
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}

const varsFile = new URL("../.dev.vars", import.meta.url);
if (!existsSync(varsFile)) {
  writeFileSync(varsFile, `ADMIN_TOKEN=${randomBytes(24).toString("base64url")}\n`, { mode: 0o600 });
  console.log("Wrote .dev.vars with a random ADMIN_TOKEN (it is git-ignored).");
}
const vars = readFileSync(varsFile, "utf8");
const token = /^ADMIN_TOKEN=(.*)$/m.exec(vars)?.[1]?.trim();
const host = args.ip.includes(":") ? `[${args.ip}]` : args.ip;
const url = `http://${host}:${args.port}`;
// The issuer is the address served now, unless .dev.vars or a flag names one: otherwise a cluster
// created while serving another port would keep that port's issuer, and join APIs pointed at
// this one would refuse its tokens.
const issuerGiven = /^ISSUER=/m.test(vars) || args.rest.some((a, i) => /^ISSUER[:=]/.test(a) && /^--var/.test(args.rest[i - 1] ?? ""));
console.log(`
Broker: ${url}   (console: ${url}/console)
Admin token: ${token ?? "(ADMIN_TOKEN missing from .dev.vars)"}
  export JOIN_BROKER_URL=${url} JOIN_BROKER_ADMIN_TOKEN=${token ?? "…"}
  curl -s -X POST -H "Authorization: Bearer $JOIN_BROKER_ADMIN_TOKEN" $JOIN_BROKER_URL/v1/admin/clusters/demo/enrollment-tokens; echo
`);

// The console's script as its TypeScript modules are now (a checkout being edited serves the edit).
const bundled = spawnSync(process.execPath, [fileURLToPath(new URL("build-console.mjs", import.meta.url))], { stdio: "inherit" });
if (bundled.status !== 0) process.exit(1);

const env = { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" };
const wranglerArgs = ["dev", "--ip", args.ip, "--port", args.port, ...(issuerGiven ? [] : ["--var", `ISSUER:${url}`]), ...args.rest];
const child = spawn("wrangler", wranglerArgs, { stdio: "inherit", env });
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
