/**
 * Read-only admin credentials: made, listed and revoked with the admin token only (a read-only
 * caller is refused by readOnlyGate before these run), and `whoami`, which tells any caller
 * what it may do (the console hides the writes of a read-only one). The index's instance keeps
 * the credentials of the whole broker; a cluster's own audit log records those limited to it.
 * @module
 */
import { createRoute, type OpenAPIHono, type z } from "@hono/zod-openapi";
import { respond, type AppEnv } from "../http/context.ts";
import { json } from "../http/openapi.ts";
import { AdminCredentialParams, AdminCredentialRequest, AnyObject } from "../../shared/protocol/schemas.ts";
import { CLUSTER_INDEX_NAME } from "../queue/cluster-index.ts";
import { newReadOnlyToken, randomId, sha256Hex } from "../tokens/secrets.ts";

type Docs = { security: { adminToken: never[] }[]; common: Record<number, object> };

export function credentialRoutes(app: OpenAPIHono<AppEnv>, { security, common }: Docs): void {
  const index = (c: { env: Env }) => c.env.JOIN_QUEUE.getByName(CLUSTER_INDEX_NAME);
  const ok = (description: string, status: 200 | 201 = 200) => ({ [status]: { description, ...json(AnyObject) }, ...common });

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/admin/whoami",
      summary: "What this bearer may do: everything (the admin token) or read only",
      security,
      responses: ok("The caller's access"),
    }),
    (c) => {
      const access = c.get("access");
      return c.json(access.readOnly ? { readOnly: true, id: access.id, cluster: access.cluster } : { readOnly: false, cluster: null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/admin/credentials",
      summary: "Create a read-only credential, for the broker or one cluster (the secret is shown once)",
      security,
      request: { body: { required: true, ...json(AdminCredentialRequest) } },
      responses: ok("The credential and its secret", 201),
    }),
    async (c) => {
      const body = c.req.valid("json") as z.infer<typeof AdminCredentialRequest>;
      const token = newReadOnlyToken();
      const id = randomId("jbc_", 9);
      const cluster = body.cluster ?? null;
      // The cluster's audit entry comes first: a credential never exists without it, and an
      // unknown cluster is refused before anything is stored.
      if (cluster !== null) {
        const recorded = await c.env.JOIN_QUEUE.getByName(cluster).recordCredentialChange("admin_credential.created", id, {
          readOnly: true,
          description: body.description ?? null,
        });
        if (!recorded.ok) return respond(c, recorded);
      }
      const created = await index(c).credentialCreate({ id, tokenHash: await sha256Hex(token), cluster, description: body.description ?? null });
      if (!created.ok) return respond(c, created);
      return c.json({ ...created.value, token }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/admin/credentials",
      summary: "List the read-only credentials (never their secrets)",
      security,
      responses: ok("The credentials"),
    }),
    async (c) => respond(c, await index(c).credentialList()),
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/v1/admin/credentials/{id}",
      summary: "Revoke a read-only credential",
      security,
      request: { params: AdminCredentialParams },
      responses: ok("The revoked credential"),
    }),
    async (c) => {
      const revoked = await index(c).credentialRevoke(c.req.valid("param").id);
      if (revoked.ok && revoked.value.changed && revoked.value.cluster !== null) {
        await c.env.JOIN_QUEUE.getByName(revoked.value.cluster).recordCredentialChange("admin_credential.revoked", revoked.value.id, {});
      }
      return respond(c, revoked);
    },
  );
}
