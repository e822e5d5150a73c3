// Finds the external programs the tests drive (etcd, etcdctl, spin, chromium, systemd-analyze, promtool,
// qemu-aarch64-static, openssl) and installs Debian's packages when they are missing and we are root. Anything else is a clear
// failure, never a skipped test. Go is found, never installed: Debian's is older than the 1.26 the
// etcd builds need.
import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync } from "node:fs";

const TOOLS = {
  etcd: { env: "ETCD_BIN", candidates: ["/usr/bin/etcd", "/usr/local/bin/etcd"], apt: "etcd-server" },
  etcdctl: { env: "ETCDCTL_BIN", candidates: ["/usr/bin/etcdctl", "/usr/local/bin/etcdctl"], apt: "etcd-client" },
  spin: { env: "SPIN_BIN", candidates: ["/usr/bin/spin", "/usr/local/bin/spin"], apt: "spin" },
  // The console's browser tests drive Debian's Chromium through playwright-core (no browser download).
  chromium: { env: "CHROMIUM_BIN", candidates: ["/usr/bin/chromium", "/usr/lib/chromium/chromium"], apt: "chromium" },
  "systemd-analyze": { env: "SYSTEMD_ANALYZE_BIN", candidates: ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"], apt: "systemd" },
  // The alert rules in contrib/prometheus are checked and unit-tested with Prometheus's own tool.
  promtool: { env: "PROMTOOL_BIN", candidates: ["/usr/bin/promtool", "/usr/local/bin/promtool"], apt: "prometheus" },
  // The gate tests' installers make each node's etcd certificates with it, as an installer script
  // would (they run `openssl` from the PATH).
  openssl: { env: "OPENSSL_BIN", candidates: ["/usr/bin/openssl", "/usr/local/bin/openssl"], apt: "openssl" },
  // Runs the linux-arm64 single executable file on another architecture, with Debian's arm64 C and
  // C++ runtime libraries (under /usr/aarch64-linux-gnu) for the dynamic loader.
  "qemu-aarch64-static": {
    env: "QEMU_AARCH64_BIN",
    candidates: ["/usr/bin/qemu-aarch64-static"],
    apt: ["qemu-user-static", "libc6-arm64-cross", "libstdc++6-arm64-cross", "libgcc-s1-arm64-cross"],
    requires: ["/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1", "/usr/aarch64-linux-gnu/lib/libstdc++.so.6"],
  },
  // The lab (test/lab/): partitions and packet loss are nftables rules inside the hosts' network
  // namespaces; clock skew is libfaketime preloaded into a host's agent and join API.
  nft: { env: "NFT_BIN", candidates: ["/usr/sbin/nft", "/sbin/nft"], apt: "nftables" },
  faketime: { env: "FAKETIME_BIN", candidates: ["/usr/bin/faketime"], apt: "faketime", requires: ["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"] },
};

/** libfaketime, preloaded (LD_PRELOAD) into a process whose clock the lab skews. */
export const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/** The directory qemu-aarch64-static takes as -L: where the arm64 dynamic loader and libraries are. */
export const AARCH64_SYSROOT = "/usr/aarch64-linux-gnu";

export function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function onPath(name) {
  try {
    return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
}

export function findTool(name) {
  const tool = TOOLS[name];
  if (!(tool.requires ?? []).every((f) => existsSync(f))) return null;
  const fromEnv = process.env[tool.env];
  if (fromEnv && executable(fromEnv)) return fromEnv;
  return tool.candidates.find(executable) ?? onPath(name);
}

/** The `go` command: $GO, PATH, or the usual install places; null when there is none. */
export function findGo() {
  return [process.env.GO, onPath("go"), "/usr/local/go/bin/go", "/usr/lib/go/bin/go"].find((c) => c && executable(c)) ?? null;
}

/** The tool's path; installs its Debian package first if needed. Throws with advice otherwise. */
export function ensureTool(name) {
  const found = findTool(name);
  if (found) return found;
  const apt = [TOOLS[name].apt].flat();
  if (process.getuid?.() !== 0) {
    throw new Error(`${name} is not installed. Install it with 'sudo apt-get install -y ${apt.join(" ")}' or set ${TOOLS[name].env}.`);
  }
  console.error(`[tools] ${name} not found: installing Debian package ${apt.join(" ")}…`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", ...apt], { stdio: "inherit", env });
  const installed = findTool(name);
  if (!installed) throw new Error(`installed ${apt.join(" ")} but still cannot find ${name}`);
  return installed;
}
