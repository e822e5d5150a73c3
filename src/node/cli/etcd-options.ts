/**
 * Options of both commands that ask etcd (the agent and the join API): its TLS files (and, for
 * the agent, the name its certificate is checked against), and the log format.
 * @module
 */
import type { Command } from "commander";
import type { TlsFiles } from "../etcd/tls-fetch.ts";
import { together } from "./command.ts";
import { choice, existingFile, path, serverName, value } from "./values.ts";

/**
 * `--etcd-cacert`, `--etcd-cert` and `--etcd-key`, as etcdctl's `--cacert`, `--cert` and `--key`.
 * `mustExist` checks the files now; without it they are read when etcd is asked (a joining
 * installer may write them only while it joins). `withServerName` adds `--etcd-server-name`, the
 * name etcd's certificate is checked against instead of each endpoint's host.
 */
export function addEtcdTlsOptions(
  cmd: Command,
  { mustExist, group, note = "", withServerName = false }: { mustExist: boolean; group?: string; note?: string; withServerName?: boolean },
): void {
  const file = mustExist ? existingFile : path;
  for (const option of [
    value("--etcd-cacert <FILE>", "CA bundle for https etcd endpoints", file),
    value("--etcd-cert <FILE>", "client certificate for etcd (with --etcd-key)", file),
    value("--etcd-key <FILE>", `its key${note}`, file),
    ...(withServerName
      ? [
          value(
            "--etcd-server-name <NAME>",
            "check etcd's server certificate against NAME instead of each endpoint's host (k0s's and k3s's etcd certificates name only localhost and 127.0.0.1)",
            serverName,
          ),
        ]
      : []),
  ]) {
    if (group) option.helpGroup(group);
    cmd.addOption(option);
  }
}

/** The TLS files given, certificate and key together, and the server name; null when none is. */
export function etcdTlsFiles(cmd: Command): TlsFiles | null {
  together(cmd, "etcdCert", "etcdKey");
  const {
    etcdCacert: ca,
    etcdCert: cert,
    etcdKey: key,
    etcdServerName: name,
  } = cmd.opts<{ etcdCacert?: string; etcdCert?: string; etcdKey?: string; etcdServerName?: string }>();
  const files: TlsFiles = { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(name ? { serverName: name } : {}) };
  return Object.keys(files).length ? files : null;
}

/** `--log-format text|json`, the same for every command that logs. */
export function logFormatOption(description: string) {
  return choice("--log-format <FORMAT>", description, ["text", "json"]).default("text");
}
