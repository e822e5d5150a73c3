/**
 * The console signed in with a read-only credential, in a real Chromium against the broker under
 * `wrangler dev`: the cluster shows as for the admin, with no write control on offer, and a
 * write forced anyway (the hidden pause button clicked by script) is refused 403 and said so.
 */
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admitted, brokerClient, enrollCluster, startBroker, type BrokerProcess } from "../support/stack.ts";
import { launchChromium, recordProblems, type LaunchedBrowser } from "../support/browser.ts";

let broker: BrokerProcess;
let chromium: LaunchedBrowser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  await Promise.all([startBroker().then((b) => (broker = b)), launchChromium().then((c) => (chromium = c))]);
});

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await chromium?.close();
  await broker?.stop();
});

async function ticket(cluster: string, token: string, node: string, i: number) {
  return (
    await brokerClient(broker, { bearer: token })
      .cluster(cluster)
      .requestTicket(node, `https://10.0.0.${10 + i}:2380`)
  ).body;
}

describe("the console with a read-only credential", () => {
  it("shows the cluster, offers no write, and says so when a write is forced", async () => {
    const cluster = "console-ro";
    const enrollment = await enrollCluster(broker, cluster);
    const boot = admitted(await ticket(cluster, enrollment, "ctrl-1", 1));
    await brokerClient(broker, { bearer: boot.admission }).cluster(cluster).complete(boot.ticket, "4660");
    expect((await ticket(cluster, enrollment, "ctrl-2", 2)).state).toBe("admitted");
    const created = await brokerClient(broker).createCredential({ readOnly: true, cluster });

    const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await context.newPage();
    const problems = await recordProblems(page);
    await page.goto(`${broker.url}/console#cluster=${cluster}`);
    await page.locator("input[type=password]").fill(created.body.token);
    await page.keyboard.press("Enter");

    await page.locator('#queue tr[data-node="ctrl-2"]').waitFor({ timeout: 60_000 });
    await page.locator("#read-only").waitFor({ state: "visible" });
    expect(await page.locator("#members tbody").textContent()).toContain("ctrl-1");
    expect(await page.locator("#audit li").count()).toBeGreaterThan(0);
    for (const write of ["#pause", "#token-form", "#queue button", "#tokens button"]) {
      expect({ write, visible: await page.locator(write).first().isVisible() }).toEqual({ write, visible: false });
    }
    expect(await page.getByRole("button", { name: /Revoke|Pause|Create token/ }).count()).toBe(0);
    expect(problems).toEqual({ console: [], exceptions: [], failedRequests: [], csp: [] });

    // Forced anyway: the broker refuses it, the page says why, and nothing changed.
    const said = new Promise<string>((resolve) => page.once("dialog", (d) => (resolve(d.message()), void d.accept())));
    await page.evaluate('document.getElementById("pause").click()');
    await page.locator("#confirm-ok").click();
    expect(await said).toMatch(/^Not allowed \(403\): .*read-only/);
    expect((await brokerClient(broker).admin(cluster).status()).body.paused).toBe(false);

    // The admin token, in another tab, gets the write controls.
    const admin = await context.newPage();
    await admin.goto(`${broker.url}/console#cluster=${cluster}`);
    await admin.locator("input[type=password]").fill(broker.adminToken);
    await admin.keyboard.press("Enter");
    await admin.getByRole("button", { name: "Revoke the admission of ctrl-2" }).waitFor({ timeout: 60_000 });
    expect(await admin.locator("#read-only").isVisible()).toBe(false);
    expect(await admin.locator("#pause").isVisible()).toBe(true);
  });
});
