// `npm run dev`: the broker under `wrangler dev` on 127.0.0.1:8787 with local Durable Object
// storage. On first run it writes .dev.vars with a random ADMIN_TOKEN and says how to use it.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const varsFile = new URL("../.dev.vars", import.meta.url);
if (!existsSync(varsFile)) {
  writeFileSync(varsFile, `ADMIN_TOKEN=${randomBytes(24).toString("base64url")}\n`, { mode: 0o600 });
  console.log("Wrote .dev.vars with a random ADMIN_TOKEN (it is git-ignored).");
}
const token = /^ADMIN_TOKEN=(.*)$/m.exec(readFileSync(varsFile, "utf8"))?.[1]?.trim();
const port = process.env.PORT ?? "8787";
console.log(`
Broker: http://127.0.0.1:${port}
Admin token: ${token ?? "(ADMIN_TOKEN missing from .dev.vars)"}
  export JOIN_BROKER_URL=http://127.0.0.1:${port} JOIN_BROKER_ADMIN_TOKEN=${token ?? "…"}
  curl -s -X POST -H "Authorization: Bearer $JOIN_BROKER_ADMIN_TOKEN" $JOIN_BROKER_URL/v1/admin/clusters/demo/enrollment-tokens
`);

const env = { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" };
const child = spawn("wrangler", ["dev", "--ip", "127.0.0.1", "--port", port, ...process.argv.slice(2)], { stdio: "inherit", env });
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
