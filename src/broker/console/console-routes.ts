/**
 * The operator's web console at `/console`: one HTML shell, one script, one stylesheet and an
 * icon, all served by the broker itself (nothing from elsewhere, so it works air-gapped) under a
 * Content-Security-Policy that allows no inline script or style. The page talks to the admin API
 * with the token the operator pastes; the broker serves the page to anyone, since it holds no
 * secret.
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { newApp, type AppEnv } from "../http/context.ts";
import { CONSOLE_HTML } from "./page.ts";
import { CONSOLE_CSS } from "./style.ts";
import { CONSOLE_JS } from "./script.generated.ts";

/** Only this origin, no inline code, no plugins, no framing, no form posts anywhere. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d4ed8"/>' +
  '<path d="M8 10h16M8 16h10M8 22h6" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>';

const ASSETS = {
  "/console": { type: "text/html; charset=utf-8", body: CONSOLE_HTML, summary: "The operator's web console (HTML)" },
  "/console/app.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_JS, summary: "The console's script" },
  "/console/app.css": { type: "text/css; charset=utf-8", body: CONSOLE_CSS, summary: "The console's stylesheet" },
  "/console/icon.svg": { type: "image/svg+xml", body: ICON_SVG, summary: "The console's icon" },
} as const;

export const consoleRoutes = newApp();

for (const [path, asset] of Object.entries(ASSETS)) {
  const mediaType = asset.type.split(";")[0];
  consoleRoutes.openapi(
    createRoute({
      method: "get",
      path,
      summary: asset.summary,
      responses: { 200: { description: asset.summary, content: { [mediaType]: { schema: z.string() } } } },
    }),
    // biome-ignore lint/suspicious/noExplicitAny: OpenAPI handlers must return the route's typed response; bodies are checked against the schemas by the tests
    (c: Context<AppEnv>): any => {
      c.header("content-type", asset.type);
      c.header("content-security-policy", CONSOLE_CSP);
      c.header("x-content-type-options", "nosniff");
      c.header("referrer-policy", "no-referrer");
      // The page may change with each deployment; revalidating costs little.
      c.header("cache-control", "no-cache");
      return c.body(asset.body, 200);
    },
  );
}
