/**
 * The operator's console at /console in a real Chromium against the broker under `wrangler dev`:
 * it loads with no console error and no CSP violation, follows the queue live (a ticket created
 * from outside shows up within 2 s, without a reload), revokes an admission (checked through the
 * API), says plainly when the admin token is wrong, and shows hostile names and malformed links
 * as text without running anything. Nodes are played by HTTP calls to the broker's node API. Screenshots of the main states go to test-results/console/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, admitted, brokerClient, enrollCluster, startBroker, type BrokerProcess } from "../support/stack.ts";
import { launchChromium, recordProblems, type LaunchedBrowser, type PageProblems } from "../support/browser.ts";

const SHOTS = join(ROOT, "test-results/console");
let broker: BrokerProcess;
let chromium: LaunchedBrowser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // Assigned as each starts, so that afterAll stops whichever did when the other fails.
  await Promise.all([startBroker().then((b) => (broker = b)), launchChromium().then((c) => (chromium = c))]);
});

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await chromium?.close();
  await broker?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A node of the test: takes a ticket with the enrollment token, and completes with the admission. */
async function node(cluster: string, token: string, name: string, i: number) {
  return (
    await brokerClient(broker, { bearer: token })
      .cluster(cluster)
      .requestTicket(name, `https://10.0.0.${10 + i}:2380`)
  ).body;
}

async function view(cluster: string, token: string, ticket: string) {
  return (await brokerClient(broker, { bearer: token }).cluster(cluster).ticket(ticket)).body;
}

async function complete(cluster: string, ticket: string, admission: string, memberID: string) {
  await brokerClient(broker, { bearer: admission }).cluster(cluster).complete(ticket, memberID);
}

const enroll = (cluster: string) => enrollCluster(broker, cluster, { description: "controllers" });

async function newPage(viewport = { width: 1280, height: 900 }): Promise<{ page: Page; problems: PageProblems }> {
  const context = await chromium.browser.newContext({ viewport, colorScheme: "light" });
  contexts.push(context);
  const page = await context.newPage();
  const problems = await recordProblems(page);
  return { page, problems };
}

/** Opens the console on `cluster` the way an operator does: the link, then the token. */
async function signIn(page: Page, cluster: string, token = broker.adminToken) {
  await page.goto(`${broker.url}/console#cluster=${cluster}`);
  await page.locator("input[type=password]").fill(token);
  await page.keyboard.press("Enter");
}

/** The page's audit long polls (`wait=`) that are out and not answered yet; watch before it loads. */
function heldPolls(page: Page): Set<unknown> {
  const out = new Set<unknown>();
  page.on("request", (r) => r.url().includes("wait=") && out.add(r));
  page.on("requestfinished", (r) => out.delete(r));
  page.on("requestfailed", (r) => out.delete(r));
  return out;
}

const noProblems: PageProblems = { console: [], exceptions: [], failedRequests: [], csp: [] };

describe("the console", () => {
  it("is served with a strict CSP, has one password input, and loads a cluster with no error or CSP violation", async () => {
    const cluster = "console-load";
    await enroll(cluster);
    const { page, problems } = await newPage();
    const held = heldPolls(page);
    const res = await page.goto(`${broker.url}/console`);
    const csp = res!.headers()["content-security-policy"];
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(await page.locator("input[type=password]").count()).toBe(1);
    // Nothing is fetched from anywhere but the broker.
    const foreign: string[] = [];
    page.on("request", (r) => {
      if (!r.url().startsWith(broker.url) && !r.url().startsWith("data:")) foreign.push(r.url());
    });
    await page.screenshot({ path: join(SHOTS, "01-sign-in.png") });
    await page.locator("#cluster").fill(cluster);
    await page.locator("input[type=password]").fill(broker.adminToken);
    await page.getByRole("button", { name: "Open" }).click();
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    await expect.poll(() => page.locator("#connection").textContent(), { timeout: 60_000 }).toBe("Live");
    expect(page.url()).toBe(`${broker.url}/console#cluster=${cluster}`);
    // The token is in session storage, never in the URL.
    expect(page.url()).not.toContain(broker.adminToken);
    expect(await page.evaluate('sessionStorage.getItem("joinBroker.adminToken")')).toBe(broker.adminToken);
    await expect.poll(() => page.locator("#audit li").count()).toBeGreaterThan(1);
    // Live, yet quiet: while nothing changes, the one held long poll is all the traffic.
    await expect.poll(() => held.size).toBe(1);
    const idle: string[] = [];
    page.on("request", (r) => idle.push(r.url()));
    await sleep(3_000);
    expect(idle).toEqual([]);
    expect(problems).toEqual(noProblems);
    expect(foreign).toEqual([]);
  });

  it("shows a ticket created from outside from its held long poll, without a reload", async () => {
    const cluster = "console-live";
    const token = await enroll(cluster);
    await node(cluster, token, "ctrl-1", 1);
    const { page, problems } = await newPage();
    const held = heldPolls(page);
    await signIn(page, cluster);
    await page.locator('#queue tr[data-node="ctrl-1"]').waitFor({ timeout: 60_000 });
    await expect.poll(() => page.locator("#connection").textContent(), { timeout: 60_000 }).toBe("Live");
    let navigations = 0;
    page.on("framenavigated", () => navigations++);
    // The page holds its long poll now: its request is out, unanswered.
    await expect.poll(() => held.size).toBe(1);
    const started = Date.now();
    await node(cluster, token, "ctrl-2", 2);
    // The held poll answers as soon as the audit log grows; without it the page would learn of the
    // ticket only when the poll's 25 s wait ran out. 10 s tells the two apart on a busy machine too.
    await page.locator('#queue tr[data-node="ctrl-2"]').waitFor({ timeout: 60_000 });
    const seenAfter = Date.now() - started;
    expect(seenAfter).toBeLessThan(10_000);
    expect(navigations).toBe(0);
    await expect.poll(() => page.locator('#queue tr[data-node="ctrl-2"] td').nth(2).textContent()).toBe("queued");
    expect(await page.locator('#queue tr[data-node="ctrl-2"] td').first().textContent()).toBe("1");
    expect(await page.locator('#timeline g.ticket[data-node="ctrl-2"]').count()).toBe(1);
    expect(problems).toEqual(noProblems);
  });

  it("revokes an admission after confirmation, and the broker agrees", async () => {
    const cluster = "console-revoke";
    const token = await enroll(cluster);
    const first = admitted(await node(cluster, token, "ctrl-1", 1));
    await complete(cluster, first.ticket, first.admission, "10501334649042878790");
    const second = admitted(await node(cluster, token, "ctrl-2", 2));
    await node(cluster, token, "ctrl-3", 3);
    const { page, problems } = await newPage();
    await signIn(page, cluster);
    const revoke = page.getByRole("button", { name: "Revoke the admission of ctrl-2" });
    await revoke.waitFor({ timeout: 60_000 });
    // Cancelling changes nothing.
    await revoke.click();
    await page.locator("#confirm").waitFor({ state: "visible" });
    await page.keyboard.press("Escape");
    await page.locator("#confirm").waitFor({ state: "hidden" });
    expect((await view(cluster, token, second.ticket)).state).toBe("admitted");
    // Confirming, with a reason, revokes.
    await revoke.click();
    await page.locator("#confirm-reason").fill("suspected stolen token");
    await page.screenshot({ path: join(SHOTS, "04-revoke-confirmation.png") });
    await page.locator("#confirm-ok").click();
    await expect.poll(async () => (await view(cluster, token, second.ticket)).state, { timeout: 60_000 }).toBe("revoked");
    const introspect = await brokerClient(broker).cluster(cluster).introspect(second.admission);
    expect(introspect.body).toMatchObject({ active: false, reason: "revoked" });
    const audit = await brokerClient(broker).admin(cluster).audit();
    expect(audit.body.entries.find((e) => e.action === "admission.revoked")).toMatchObject({
      subject: second.jti,
      detail: { reason: "suspected stolen token" },
    });
    // The page shows the slot passed on: ctrl-2 gone from the queue, ctrl-3 admitted.
    await page.locator('#queue tr[data-node="ctrl-2"]').waitFor({ state: "detached", timeout: 60_000 });
    await expect.poll(() => page.locator('#queue tr[data-node="ctrl-3"] td').nth(2).textContent()).toBe("admitted");
    expect(problems).toEqual(noProblems);
  });

  it("shows a member left for an operator: the node's words and the command, until resume clears it", async () => {
    const cluster = "console-stuck";
    const token = await enroll(cluster);
    const first = admitted(await node(cluster, token, "ctrl-1", 1));
    await complete(cluster, first.ticket, first.admission, "10501334649042878790");
    const second = admitted(await node(cluster, token, "ctrl-2", 2));
    await node(cluster, token, "ctrl-3", 3);
    const detail =
      "could not remove member 2a (a voter, never started) from etcd within 120 s: etcdserver: request timed out. Remove it: etcdctl --endpoints=https://localhost:2379 member remove 2a";
    // Raw: the typed client has no call for a stuck member (only the agent reports one).
    const stuck = await fetch(`${broker.url}/v1/clusters/${cluster}/tickets/${second.ticket}/stuck`, {
      method: "POST",
      headers: { authorization: `Bearer ${second.admission}`, "content-type": "application/json" },
      body: JSON.stringify({ memberID: "42", detail }),
    });
    expect(stuck.status).toBe(200);
    const { page, problems } = await newPage();
    await signIn(page, cluster);
    const notice = page.locator("#needs-operator");
    await notice.waitFor({ state: "visible", timeout: 60_000 });
    expect(await notice.textContent()).toContain("ctrl-2 left etcd member 2a that it could not remove");
    expect(await notice.textContent()).toContain(detail);
    expect(await page.locator("#state-badge").textContent()).toBe("needs an operator");
    await page.screenshot({ path: join(SHOTS, "05-needs-operator.png") });
    // The operator removed the member and resumes from the console: the notice goes, ctrl-3 is admitted.
    await page.locator("#pause").click();
    await page.locator("#confirm-ok").click();
    await notice.waitFor({ state: "hidden", timeout: 60_000 });
    expect((await brokerClient(broker).admin(cluster).status()).body).toMatchObject({ paused: false, needsOperator: null });
    await expect.poll(() => page.locator('#queue tr[data-node="ctrl-3"] td').nth(2).textContent(), { timeout: 60_000 }).toBe("admitted");
    expect(problems).toEqual(noProblems);
  });

  it("says plainly when the admin token is wrong, and keeps nothing", async () => {
    const cluster = "console-wrong";
    await enroll(cluster);
    const { page } = await newPage();
    await signIn(page, cluster, "not-the-admin-token");
    const error = page.getByRole("alert");
    await error.waitFor({ state: "visible", timeout: 60_000 });
    expect(await error.textContent()).toMatch(/^Wrong admin token.*refused this admin token/);
    expect(await page.locator("#dashboard").isHidden()).toBe(true);
    expect(await page.evaluate('sessionStorage.getItem("joinBroker.adminToken")')).toBeNull();
    await page.screenshot({ path: join(SHOTS, "02-wrong-token.png") });
    // An unknown cluster is told apart from a wrong token.
    await page.locator("#cluster").fill("no-such-cluster");
    await page.locator("input[type=password]").fill(broker.adminToken);
    await page.keyboard.press("Enter");
    await expect.poll(() => error.textContent(), { timeout: 60_000 }).toMatch(/^Unknown cluster/);
  });

  it("says a malformed link is malformed, and signs in all the same", async () => {
    const cluster = "console-badlink";
    await enroll(cluster);
    const { page, problems } = await newPage();
    await page.goto(`${broker.url}/console#cluster=%`);
    const error = page.getByRole("alert");
    await error.waitFor({ state: "visible", timeout: 60_000 });
    expect(await error.textContent()).toMatch(/^Malformed link/);
    // The form is the script's: the token goes to the broker as a bearer header, not into a URL.
    await page.locator("#cluster").fill(cluster);
    await page.locator("input[type=password]").fill(broker.adminToken);
    await page.keyboard.press("Enter");
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    expect(page.url()).toBe(`${broker.url}/console#cluster=${cluster}`);
    // A malformed link followed later is told too, and changes nothing.
    await page.evaluate('location.hash = "#cluster=%E0%A4%A"');
    await expect.poll(() => page.locator("#connection").textContent()).toMatch(/^Malformed link/);
    expect(await page.locator("#cluster-name").textContent()).toBe(cluster);
    expect(await page.locator("#dashboard").isVisible()).toBe(true);
    expect(problems).toEqual(noProblems);
  });

  it("never puts the admin token into a URL, even when the browser submits the sign-in form itself, without CSP", async () => {
    // No script, and no CSP either (its form-action 'none' would stop the submission): the form alone.
    const context = await chromium.browser.newContext({ javaScriptEnabled: false, bypassCSP: true });
    contexts.push(context);
    const page = await context.newPage();
    const urls: string[] = [];
    page.on("request", (r) => urls.push(r.url()));
    await page.goto(`${broker.url}/console#cluster=console-nojs`);
    await page.locator("#cluster").fill("console-nojs");
    await page.locator("input[type=password]").fill(broker.adminToken);
    await page.keyboard.press("Enter");
    // The form was submitted (by the browser: no script runs here), with the cluster only.
    await expect.poll(() => urls.some((u) => new URL(u).searchParams.get("cluster") === "console-nojs"), { timeout: 60_000 }).toBe(true);
    for (const url of [...urls, page.url()]) expect(url).not.toContain(broker.adminToken);
  });

  it("shows what an operator typed as text: markup in a description or a reason creates no element and runs nothing", async () => {
    const cluster = "console-markup";
    const description = `<img src=x id=from-description onerror="document.title='pwned'">`;
    const reason = `<svg id=from-reason onload="document.title='pwned'"></svg><b>bold</b>`;
    const admin = brokerClient(broker).admin(cluster);
    await admin.createEnrollmentToken({ description });
    const token = await enroll(cluster);
    const boot = admitted(await node(cluster, token, "ctrl-1", 1));
    await admin.revokeAdmission(boot.jti, reason);
    const { page, problems } = await newPage();
    await signIn(page, cluster);
    await expect.poll(() => page.locator("#tokens tbody td").allTextContents(), { timeout: 60_000 }).toContain(description);
    await expect
      .poll(() => page.locator("#audit .detail").allTextContents(), { timeout: 60_000 })
      .toEqual(expect.arrayContaining([expect.stringContaining(reason)]));
    expect(await page.locator("#from-description, #from-reason, main img, main svg b, #audit b, #tokens b").count()).toBe(0);
    expect(await page.title()).not.toBe("pwned");
    expect(problems).toEqual(noProblems);
  });

  it("shows hostile node and cluster names as text: they create no element and run nothing", async () => {
    const cluster = "console-hostile";
    const token = await enroll(cluster);
    const hostileNode = (n: number) => `<img src=x class=hostile onerror="window.__pwned='node ${n}'">ctrl-${n}`;
    const hostileCluster = `<svg id=hostile-cluster onload="window.__pwned='cluster'"></svg>x`;
    // The broker refuses such a node name… (raw: the typed client would refuse it before sending)
    const refused = await fetch(`${broker.url}/v1/clusters/${cluster}/tickets`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ node: hostileNode(9), peerURL: "https://10.0.0.9:2380" }),
    });
    expect(refused.status).toBe(400);
    // …so the page is shown some all the same: the broker's real answers, with each node's name
    // replaced on the way into the browser. ctrl-1 joined, ctrl-2 holds the slot, ctrl-3 waits.
    const first = admitted(await node(cluster, token, "ctrl-1", 1));
    await complete(cluster, first.ticket, first.admission, "10501334649042878790");
    expect((await node(cluster, token, "ctrl-2", 2)).state).toBe("admitted");
    await node(cluster, token, "ctrl-3", 3);
    const { page, problems } = await newPage();
    await page.route(`${broker.url}/v1/admin/clusters/${cluster}**`, async (route) => {
      try {
        const response = await route.fetch();
        const body = (await response.text()).replace(/"ctrl-(\d)"/g, (_, n) => JSON.stringify(hostileNode(Number(n))));
        await route.fulfill({ response, body });
      } catch {
        /* the page moved on (a long poll aborted) */
      }
    });
    // Remembered clusters are the page's own storage, yet shown as text too.
    await page.addInitScript({ content: `localStorage.setItem("joinBroker.clusters", ${JSON.stringify(JSON.stringify([hostileCluster]))})` });
    await signIn(page, cluster);
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    await expect.poll(() => page.locator("#queue tbody td.mono").allTextContents(), { timeout: 60_000 }).toEqual([hostileNode(2), hostileNode(3)]);
    await expect.poll(() => page.locator("#members tbody td.mono").first().textContent()).toBe(hostileNode(1));
    expect(await page.locator("#members tbody td.mono").allTextContents()).toContain(hostileNode(2));
    expect(await page.locator("#facts").textContent()).toContain("done by " + hostileNode(1));
    expect(await page.locator("#timeline g.ticket title").allTextContents()).toEqual(
      expect.arrayContaining([expect.stringMatching(/^<img src=x class=hostile .*ctrl-1 \(bootstrap\)/)]),
    );
    await expect.poll(() => page.locator("#audit .detail").allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining(hostileNode(3))]));
    await expect.poll(() => page.locator("#switch-cluster option").allTextContents(), { timeout: 60_000 }).toContain(hostileCluster);
    expect(await page.locator("#known-clusters option").evaluateAll((os) => os.map((o) => o.getAttribute("value")))).toContain(hostileCluster);
    // The confirmation names the node as text too.
    await page.locator("#queue button.action").click();
    expect(await page.locator("#confirm-title").textContent()).toBe(`Revoke the admission of ${hostileNode(2)}?`);
    await page.keyboard.press("Escape");
    await page.locator("#confirm").waitFor({ state: "hidden" });

    // A link that names a hostile cluster: the broker refuses the name, the page says so.
    await page.evaluate(`location.hash = ${JSON.stringify("#cluster=" + encodeURIComponent(hostileCluster))}`);
    const error = page.getByRole("alert");
    await error.waitFor({ state: "visible", timeout: 60_000 });
    expect(await error.textContent()).toMatch(/^Request failed \(400 /);
    expect(await page.locator("#cluster").inputValue()).toBe(hostileCluster);
    expect(await page.locator("#connection").textContent()).toBe("Not connected");

    expect(await page.locator(".hostile, #hostile-cluster, main img, select svg, datalist svg, #facts img, #audit img").count()).toBe(0);
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    await page.unrouteAll({ behavior: "ignoreErrors" });
    // The one complaint is Chromium's own line about the refused name's 400.
    expect({ ...problems, console: problems.console.filter((m) => !/status of 400/.test(m)) }).toEqual(noProblems);
  });

  it("opens nothing from a link with garbage after #cluster=, even with a token in the tab", async () => {
    const cluster = "console-garbage";
    await enroll(cluster);
    const { page, problems } = await newPage();
    await signIn(page, cluster);
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    await page.goto("about:blank");
    const clusterCalls: string[] = [];
    page.on("request", (r) => {
      if (new URL(r.url()).pathname.startsWith("/v1/admin/clusters/")) clusterCalls.push(r.url());
    });
    // Not percent-encoding, with markup in it: the same tab (its token in session storage), loaded afresh.
    await page.goto(`${broker.url}/console#cluster=%ZZ%3Cimg%20id%3Dfrom-link%20src%3Dx%20onerror%3D%22window.__pwned%3D1%22%3E&cluster=x`);
    const error = page.getByRole("alert");
    await error.waitFor({ state: "visible", timeout: 60_000 });
    expect(await error.textContent()).toMatch(/^Malformed link/);
    expect(await page.locator("#dashboard").isHidden()).toBe(true);
    // The token is still there, and the cluster last opened is offered.
    expect(await page.locator("#token").inputValue()).toBe(broker.adminToken);
    expect(await page.locator("#cluster").inputValue()).toBe(cluster);
    await sleep(500);
    expect(clusterCalls).toEqual([]);
    expect(await page.locator("#from-link, main img").count()).toBe(0);
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    // One Enter opens it.
    await page.locator("#cluster").press("Enter");
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    expect(page.url()).toBe(`${broker.url}/console#cluster=${cluster}`);
    expect(problems).toEqual(noProblems);
  });

  it("shows a 1 + 6 join: the queue, the timeline and the audit stream (screenshots)", async () => {
    const cluster = "prod-eu";
    const token = await enroll(cluster);
    const { page, problems } = await newPage();
    await signIn(page, cluster);
    await page.locator("#dashboard").waitFor({ state: "visible", timeout: 60_000 });
    const nodes = [];
    for (let i = 1; i <= 7; i++) {
      nodes.push({ name: `ctrl-${i}`, ...(await node(cluster, token, `ctrl-${i}`, i)) });
      await sleep(150);
    }
    // The bootstrap node and three joiners finish, one after the other; the fifth holds the slot.
    for (let i = 0; i < 4; i++) {
      await sleep(900);
      const current = admitted(await view(cluster, token, nodes[i].ticket));
      await complete(cluster, nodes[i].ticket, current.admission, String(10501334649042878790n + BigInt(i) * 7919n));
    }
    await page.locator('#queue tr[data-node="ctrl-5"].admitted').waitFor({ timeout: 60_000 });
    await expect.poll(() => page.locator("#members tbody tr").count()).toBe(5);
    await expect.poll(() => page.locator("#queue tbody tr").count(), { timeout: 60_000 }).toBe(3);
    await expect.poll(() => page.locator("#timeline g.ticket").count(), { timeout: 60_000 }).toBe(7);
    await expect.poll(() => page.locator("#timeline circle.end-joined").count(), { timeout: 60_000 }).toBe(4);
    // Member IDs read as etcdctl prints them.
    expect(await page.locator("#members tbody tr").first().locator("td").nth(2).textContent()).toBe(10501334649042878790n.toString(16));
    await page.screenshot({ path: join(SHOTS, "03-join-1+6.png"), fullPage: true });
    await page.screenshot({ path: join(ROOT, "test-results/console/03-join-1+6-top.png") });

    // A token created on the page is shown once.
    await page.locator("#token-description").fill("wave 2");
    await page.getByRole("button", { name: "Create token" }).click();
    await page.locator("#confirm-ok").click();
    await page.locator("#new-token").waitFor({ state: "visible", timeout: 60_000 });
    const shown = await page.locator("#new-token-value").inputValue();
    expect(shown).toMatch(/^jbe_/);
    await expect.poll(() => page.locator("#tokens tbody tr").count()).toBe(2);
    await page.locator("#new-token").scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, "05-token-created.png") });
    // …and works: a node takes a ticket with it.
    expect((await node(cluster, shown, "ctrl-8", 8)).state).toBe("queued");
    // It expires in 24 h, the form's default; one that never expires is asked for.
    const listed = async () => (await brokerClient(broker).admin(cluster).listEnrollmentTokens()).body.tokens;
    const wave2 = (await listed()).find((t) => t.description === "wave 2")!;
    expect(Math.abs(Date.parse(wave2.expiresAt!) - (Date.now() + 24 * 3_600_000))).toBeLessThan(120_000);
    await page.locator("#hide-token").click();
    await page.locator("#token-description").fill("forever");
    await page.locator("#token-no-expiry").check();
    expect(await page.locator("#token-ttl").isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Create token" }).click();
    expect(await page.locator("#confirm").textContent()).toContain("never expires");
    await page.locator("#confirm-ok").click();
    await page.locator("#new-token").waitFor({ state: "visible", timeout: 60_000 });
    await expect.poll(async () => (await listed()).find((t) => t.description === "forever")?.expiresAt, { timeout: 60_000 }).toBeNull();
    await expect.poll(() => page.locator("#tokens tbody tr").count()).toBe(3);

    // The broker's clusters are one choice away; switching follows the link form #cluster=NAME.
    await expect.poll(() => page.locator("#switch-cluster option").allTextContents()).toEqual(expect.arrayContaining(["console-live", "prod-eu"]));
    await page.locator("#switch-cluster").selectOption("console-live");
    await expect.poll(() => page.locator("#cluster-name").textContent()).toBe("console-live");
    expect(page.url()).toBe(`${broker.url}/console#cluster=console-live`);
    await page.locator('#queue tr[data-node="ctrl-2"]').waitFor({ timeout: 60_000 });

    // On a phone.
    const phone = await newPage({ width: 390, height: 844 });
    await signIn(phone.page, cluster);
    await phone.page.locator('#queue tr[data-node="ctrl-5"]').waitFor({ timeout: 60_000 });
    await sleep(500);
    await phone.page.screenshot({ path: join(SHOTS, "06-phone.png"), fullPage: true });
    const overflow = await phone.page.evaluate<number>("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    expect(overflow).toBeLessThanOrEqual(0);
    expect(problems).toEqual(noProblems);
    expect(phone.problems).toEqual(noProblems);
  });
});
