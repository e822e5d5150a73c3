/**
 * A real Chromium (Debian's package, found or installed by scripts/tools.mjs) driven by
 * playwright-core, headless, with a fresh profile (playwright makes a new --user-data-dir per launch) and no background network traffic, plus a
 * recorder of everything a page reports as wrong: console errors, uncaught exceptions, failed
 * requests and Content-Security-Policy violations.
 */
import { chromium, type Browser, type Page } from "playwright-core";
import { findTool } from "../../scripts/tools.mjs";

export interface LaunchedBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<LaunchedBrowser> {
  const executablePath = findTool("chromium");
  if (!executablePath) throw new Error("chromium is not installed: run `npm test` (it installs Debian's chromium) or set CHROMIUM_BIN");
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    browser,
    close: async () => {
      await browser.close().catch(() => {});
    },
  };
}

export interface PageProblems {
  console: string[];
  exceptions: string[];
  failedRequests: string[];
  csp: string[];
}

/** Starts recording what goes wrong on `page` (call before its first navigation). */
export async function recordProblems(page: Page): Promise<PageProblems> {
  const problems: PageProblems = { console: [], exceptions: [], failedRequests: [], csp: [] };
  page.on("console", (m) => {
    if (m.type() === "error") problems.console.push(m.text());
  });
  page.on("pageerror", (e) => problems.exceptions.push(e.message));
  page.on("requestfailed", (r) => {
    // A long poll cut short by navigation or close is not a failure of the page.
    if (!/ERR_ABORTED/.test(r.failure()?.errorText ?? "")) problems.failedRequests.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`);
  });
  await page.exposeFunction("__reportCspViolation", (text: string) => problems.csp.push(text));
  await page.addInitScript({
    content: `document.addEventListener("securitypolicyviolation", (e) =>
      window.__reportCspViolation(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " (" + e.sourceFile + ":" + e.lineNumber + ")"));`,
  });
  return problems;
}
