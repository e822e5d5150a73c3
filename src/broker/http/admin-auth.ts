/**
 * Who may call the admin API: the ADMIN_TOKEN (everything), or a read-only credential (reads
 * only, of every cluster or of one). Both are compared in constant time: the admin token
 * directly, a read-only credential by the SHA-256 its row is found under. Failed attempts of
 * either count against the client's address (authFailure).
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import { timingSafeEqual } from "hono/utils/buffer";
import { problem } from "../../shared/protocol/problem.ts";
import { CLUSTER_INDEX_NAME } from "../queue/cluster-index.ts";
import { READ_ONLY_TOKEN_PREFIX, sha256Hex } from "../tokens/secrets.ts";
import { authFailure, type AdminAccess, type AppEnv } from "./context.ts";
import { sendProblem } from "./problem-response.ts";

/** Why a read-only caller may not make this request, or null when it may. */
export function readOnlyRefusal(access: AdminAccess, method: string, path: string): string | null {
  if (!access.readOnly) return null;
  if (method !== "GET" && method !== "HEAD") return "a read-only credential cannot change anything";
  if (path === "/v1/admin/credentials" || path.startsWith("/v1/admin/credentials/")) return "only the admin token manages admin credentials";
  const cluster = /^\/v1\/admin\/clusters\/([^/]+)/.exec(path)?.[1];
  if (access.cluster !== null && cluster !== undefined && decoded(cluster) !== access.cluster) return `this credential reads only cluster ${access.cluster}`;
  return null;
}

/** A path segment decoded as the router decodes it; null when it is not valid percent-encoding. */
function decoded(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

export const adminAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  const expected = c.env.ADMIN_TOKEN;
  if (!expected) return authFailure(c, "the admin API is disabled: the ADMIN_TOKEN secret is not set");
  const deny = (ctx: Context<AppEnv>) => authFailure(ctx, "a valid admin token or read-only credential is required (Authorization: Bearer <token>)");
  return bearerAuth<AppEnv>({
    verifyToken: async (token, ctx) => {
      if (await timingSafeEqual(expected, token)) {
        ctx.set("access", { readOnly: false });
        return true;
      }
      if (!token.startsWith(READ_ONLY_TOKEN_PREFIX)) return false;
      const found = await ctx.env.JOIN_QUEUE.getByName(CLUSTER_INDEX_NAME).credentialAuthenticate(await sha256Hex(token));
      if (!found) return false;
      ctx.set("access", { readOnly: true, id: found.id, cluster: found.cluster });
      return true;
    },
    noAuthenticationHeader: { message: deny },
    invalidAuthenticationHeader: { message: deny },
    invalidToken: { message: deny },
  })(c, next);
};

/** After adminAuth: a read-only caller's write, or read of another cluster, is 403 and reaches nothing. */
export const readOnlyGate: MiddlewareHandler<AppEnv> = async (c, next) => {
  const why = readOnlyRefusal(c.get("access"), c.req.method, c.req.path);
  if (why) return sendProblem(c, problem(403, "forbidden", why));
  await next();
};
