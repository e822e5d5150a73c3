// The Go verifier module (integrations/go): `go vet ./...` and `go test -count=1 ./...` (never
// from Go's test cache, so regenerated vectors are always read), offline (the shared vectors;
// the live-broker test is skipped here and run by test/e2e/go-verifier.test.ts).
// Its one dependency, go-jose, comes through the Go module proxy, checked against go.sum.
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findGo } from "./tools.mjs";

export { findGo };

export const GO_MODULE = resolve(fileURLToPath(new URL("../integrations/go", import.meta.url)));

/** Runs `go args…` in the module; returns the exit status. */
export function go(args, env = {}) {
  const bin = findGo();
  if (!bin) throw new Error("no 'go' found (PATH, $GO, /usr/local/go/bin): install Go 1.24 or newer");
  const r = spawnSync(bin, args, { cwd: GO_MODULE, stdio: "inherit", env: { ...process.env, GOFLAGS: "-mod=readonly", ...env } });
  return r.status ?? 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const args of [
    ["vet", "./..."],
    ["test", "-count=1", "./..."],
  ]) {
    console.log(`go ${args.join(" ")}  (in integrations/go)`);
    const status = go(args);
    if (status !== 0) process.exit(status);
  }
}
