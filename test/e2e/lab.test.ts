/**
 * The lab itself (test/lab/lab.ts): hosts that reach each other over the lab's bridge and nothing
 * else, and each fault doing what it says: a two-way and a one-way partition, loss, a link flap,
 * a paused process, a skewed clock; the namespaces gone after `destroy()`, and a crashed run's
 * reaped by the next.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Lab, labSkipReason, reapStaleLabs } from "../lab/lab.ts";

const skip = await labSkipReason();
let lab: Lab;

/** Whether `from` opens a TCP connection to `to`'s port 7000 within a second. */
function connects(from: string, to: string): boolean {
  const code = `const s=require("net").connect(7000,${JSON.stringify(lab.host(to).ip)},()=>process.exit(0));s.on("error",()=>process.exit(1));setTimeout(()=>process.exit(1),1000)`;
  try {
    lab.exec(from, process.execPath, ["-e", code]);
    return true;
  } catch {
    return false;
  }
}

const namespaces = () => execFileSync("ip", ["netns", "list"], { encoding: "utf8" });

beforeAll(async () => {
  if (skip) return;
  lab = await Lab.create();
  for (const h of ["a", "b", "c"]) {
    lab.addHost(h);
    const server = lab.spawn(
      h,
      process.execPath,
      ["-e", `require("net").createServer((s)=>{s.on("error",()=>{});s.end("${h}\\n")}).listen(7000,"0.0.0.0",()=>console.log("up"))`],
      { stdio: ["ignore", "pipe", "inherit"], detached: true },
    );
    await new Promise((r) => server.stdout!.once("data", r));
  }
}, 60_000);

/** A mount point another lab made while this file's lab ran: gone once this one is destroyed too, if no other lab runs then. */
let madeByOther: string | null = null;
afterAll(() => {
  lab?.destroy();
  const othersRun = execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
    .split("\n")
    .some((l) => /^jbl\d+x\d+-/.test(l));
  if (madeByOther && !othersRun) expect(existsSync(madeByOther), "the last lab removes the mount points labs made").toBe(false);
});

it.skipIf(skip)("hosts reach each other on their own addresses; the test reaches them through the probe", async () => {
  // The lab's own /24 of 10.77.0.0/16: labs of files running at once never share an address.
  expect(lab.subnet).toMatch(/^10\.77\.\d+\.0\/24$/);
  expect(lab.host("a").ip.startsWith(lab.subnet.replace(/0\/24$/, ""))).toBe(true);
  expect(lab.exec("a", "ip", ["-4", "-o", "addr", "show", "eth0"])).toContain(`${lab.host("a").ip}/24`);
  expect(connects("a", "b") && connects("b", "c") && connects("c", "a")).toBe(true);
  const url = await lab.reach(`http://${lab.host("b").ip}:7000`);
  const { hostname, port } = new URL(url);
  const answer = await new Promise<string>((ok, fail) => {
    const s = connect(Number(port), hostname);
    let text = "";
    s.on("data", (d) => (text += d))
      .on("end", () => ok(text))
      .on("error", fail);
  });
  expect(answer).toBe("b\n");
  // No route out: the bridge has no uplink, a host has only its lab's subnet.
  expect(lab.exec("a", "ip", ["route"])).not.toMatch(/default/);
});

it.skipIf(skip)("a two-way partition cuts both directions and nothing else; heal restores it", () => {
  const id = lab.partition(["a"], ["b"]);
  expect(connects("a", "b")).toBe(false);
  expect(connects("b", "a")).toBe(false);
  expect(connects("a", "c") && connects("c", "b")).toBe(true);
  lab.heal(id);
  expect(connects("a", "b") && connects("b", "a")).toBe(true);
});

it.skipIf(skip)("a one-way partition drops one direction's packets only", () => {
  const id = lab.partition(["a"], ["b"], { oneWay: true });
  expect(connects("a", "b")).toBe(false);
  // b's packets reach a: a sees b's connection attempt (its answer is what gets dropped).
  expect(lab.exec("a", "nft", ["list", "chain", "inet", "lab", "input"])).not.toContain(lab.host("b").ip);
  expect(lab.exec("a", "nft", ["list", "chain", "inet", "lab", "output"])).toContain(lab.host("b").ip);
  lab.heal(id);
  expect(connects("a", "b")).toBe(true);
});

it.skipIf(skip)("loss drops a share of a host's packets; 100 % is a wall", () => {
  lab.loss("c", 100);
  expect(connects("a", "c")).toBe(false);
  lab.loss("c", 0);
  expect(connects("a", "c")).toBe(true);
});

it.skipIf(skip)("latency: a connection to a host's port goes through a proxy that holds what it carries; undelay ends it", async () => {
  // Round trips from a to b's port 7000 and back, measured inside a (connect, one answer, close).
  const roundTrip = () => {
    const code = `const t=Date.now();const s=require("net").connect(7000,${JSON.stringify(lab.host("b").ip)});s.on("data",()=>{console.log(Date.now()-t);process.exit(0)});s.on("error",()=>process.exit(1))`;
    return Number(lab.exec("a", process.execPath, ["-e", code]).trim());
  };
  // Below what the delay guarantees (350 ms at least), however loaded the machine.
  expect(roundTrip()).toBeLessThan(350);
  const id = await lab.delay("b", 7000, 400, 50);
  // b answers as soon as the connection opens: its answer is held once, 400 ms ± 50.
  expect(roundTrip()).toBeGreaterThanOrEqual(350);
  lab.undelay(id);
  expect(roundTrip()).toBeLessThan(350);
});

it.skipIf(skip)("a link flap takes a host off the bridge and brings it back", async () => {
  const flap = lab.flap("b", 1500);
  expect(connects("a", "b")).toBe(false);
  await flap;
  const deadline = Date.now() + 10_000;
  while (!connects("a", "b") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(connects("a", "b")).toBe(true);
});

it.skipIf(skip)("a skewed clock is the host's processes' time, and it can jump while they run", async () => {
  const proc = lab.spawn("a", process.execPath, ["-e", `setInterval(()=>console.log(Date.now()),100)`], {
    env: { ...process.env, ...lab.clockEnv("a") },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let last = 0;
  proc.stdout!.setEncoding("utf8").on("data", (d: string) => (last = Number(d.trim().split("\n").pop())));
  const offset = async (want: (o: number) => boolean) => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (last && want(last - Date.now())) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  };
  expect(await offset((o) => Math.abs(o) < 2_000)).toBe(true);
  lab.skew("a", 300);
  expect(await offset((o) => Math.abs(o - 300_000) < 2_000)).toBe(true);
  lab.skew("a", -120);
  expect(await offset((o) => Math.abs(o + 120_000) < 2_000)).toBe(true);
  proc.kill("SIGKILL");
});

it.skipIf(skip)("a paused process answers nothing until it is resumed", async () => {
  const proc = spawn(process.execPath, ["-e", "setInterval(()=>console.log('tick'),50)"], { detached: true, stdio: ["ignore", "pipe", "inherit"] });
  let ticks = 0;
  proc.stdout!.on("data", () => ticks++);
  await expect.poll(() => ticks).toBeGreaterThan(0);
  lab.pause(proc.pid!);
  // What it wrote before the stop may still be on its way; then half a second in which nothing may come.
  await new Promise((r) => setTimeout(r, 200));
  const paused = ticks;
  await new Promise((r) => setTimeout(r, 500));
  expect(ticks).toBe(paused);
  lab.resume(proc.pid!);
  await expect.poll(() => ticks).toBeGreaterThan(paused);
  proc.kill("SIGKILL");
});

it.skipIf(skip)("destroy removes every namespace of the lab; a crashed run's are reaped, a live run's are not", async () => {
  // A lab left behind by a process that no longer exists (pid 2^22+1 is above pid_max's default).
  execFileSync("ip", ["netns", "add", "jbl4194305x1-left"]);
  const other = await Lab.create();
  expect(namespaces()).not.toContain("jbl4194305x1-left");
  // Two labs at once: names and subnets of their own.
  expect(other.prefix).not.toBe(lab.prefix);
  expect(other.subnet).not.toBe(lab.subnet);
  expect(reapStaleLabs()).toEqual([]);
  expect(namespaces()).toContain(lab.prefix);
  other.destroy();
  expect(namespaces()).not.toContain(other.prefix);
});

it.skipIf(skip)("a mount point a lab made stays while another lab runs (whose processes may have it bound), and goes with the last lab", async () => {
  const path = `/var/lib/${lab.prefix}made`;
  const other = await Lab.create();
  other.addHost("a");
  other.privatePath("a", path);
  expect(existsSync(path)).toBe(true);
  other.destroy();
  expect(existsSync(path), "this file's lab still runs").toBe(true);
  madeByOther = path;
});

it.skipIf(skip)("a private path is each host's own: what one host writes there, no other host and not the machine sees", () => {
  const path = `/var/lib/${lab.prefix}private`;
  const backingA = lab.privatePath("a", path);
  lab.privatePath("b", path);
  lab.exec("a", "sh", ["-c", `echo a > ${path}/who`]);
  lab.exec("b", "sh", ["-c", `echo b > ${path}/who`]);
  expect(lab.exec("a", "cat", [`${path}/who`])).toBe("a\n");
  expect(lab.exec("b", "cat", [`${path}/who`])).toBe("b\n");
  expect(readFileSync(join(backingA, "who"), "utf8")).toBe("a\n");
  // Host c has no private path there: it sees the machine's directory, which stayed empty.
  expect(lab.exec("c", "ls", ["-A", path])).toBe("");
  expect(readdirSync(path)).toEqual([]);
  // A process on the host keeps its own pid through ip, unshare and sh (signals reach it).
  const child = lab.spawn("a", "sh", ["-c", "echo $$; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
  return new Promise<void>((done, fail) => {
    child.stdout!.once("data", (d: Buffer) => {
      try {
        expect(Number(String(d).trim())).toBe(child.pid);
        child.kill("SIGKILL");
        done();
      } catch (e) {
        fail(e);
      }
    });
  });
});
