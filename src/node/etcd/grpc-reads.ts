/**
 * The two reads a node makes of its own etcd, `Maintenance.Status` and `Cluster.MemberList`, over
 * etcd's gRPC port (HTTP/2, the client URL) rather than its JSON gateway. With etcd's auth on,
 * the gateway takes no client certificate as a user (and refuses one that names a user), and
 * from 3.5.35 and 3.6.16 on etcd answers these two reads only to a client it can name: over
 * gRPC, a node's own certificate is such a client (its common name is the node's, which no etcd
 * user has, so it gets nothing but these reads). Unary calls, each framed as gRPC frames a
 * message, over one HTTP/2 session per endpoint, made again when it fails or the files change;
 * the two messages are decoded here, field by field, as etcd's rpc.proto numbers them.
 * @module
 */
import { connect, type ClientHttp2Session } from "node:http2";
import { readFileSync } from "node:fs";
import { classifyEtcdError, type EtcdError, type EtcdMember, type EtcdResult, type EtcdStatus, type MemberListResult, type ResponseHeader } from "./gateway.ts";
import { tlsHandshakeError, type TlsFiles, type TlsHandshakeError } from "./tls-fetch.ts";

export class EtcdGrpcReads {
  readonly endpoint: string;
  readonly #files: TlsFiles;
  readonly #timeoutMs: number;
  #session: ClientHttp2Session | null = null;
  #sessionFor = "";
  #sessionError: Error | null = null;

  readonly #onHandshakeError: ((e: TlsHandshakeError) => void) | undefined;

  constructor(endpoint: string, files: TlsFiles, options: { timeoutMs?: number; onHandshakeError?: (e: TlsHandshakeError) => void } = {}) {
    this.endpoint = new URL(endpoint).origin;
    this.#files = files;
    this.#timeoutMs = options.timeoutMs ?? 3_000;
    this.#onHandshakeError = options.onHandshakeError;
  }

  async status(): Promise<EtcdResult<EtcdStatus>> {
    const got = await this.#unary("/etcdserverpb.Maintenance/Status");
    if (!got.ok) return got;
    const f = decode(got.value);
    const leader = uint(f, 4);
    return {
      ok: true,
      endpoint: this.endpoint,
      value: {
        header: header(f),
        version: text(f, 2),
        leader: leader === "0" ? "" : leader,
        raftIndex: uint(f, 5),
        raftAppliedIndex: uint(f, 7),
        isLearner: uint(f, 10) === "1",
        errors: texts(f, 8),
        endpoint: this.endpoint,
      },
    };
  }

  async memberList(): Promise<EtcdResult<MemberListResult>> {
    const got = await this.#unary("/etcdserverpb.Cluster/MemberList");
    if (!got.ok) return got;
    const f = decode(got.value);
    const members = (f.get(2) ?? []).map((raw): EtcdMember => {
      const m = decode(raw as Uint8Array);
      const name = text(m, 2);
      const clientURLs = texts(m, 4);
      return { id: uint(m, 1), name, peerURLs: texts(m, 3), clientURLs, isLearner: uint(m, 5) === "1", started: name !== "" || clientURLs.length > 0 };
    });
    return { ok: true, endpoint: this.endpoint, value: { header: header(f), members } };
  }

  close(): void {
    this.#session?.close();
    this.#session = null;
  }

  #sessionNow(): ClientHttp2Session {
    const ca = this.#files.ca ? readFileSync(this.#files.ca) : undefined;
    const cert = this.#files.cert ? readFileSync(this.#files.cert) : undefined;
    const key = this.#files.key ? readFileSync(this.#files.key) : undefined;
    const id = [ca, cert, key].map((b) => b?.toString("base64") ?? "").join(".");
    if (this.#session && !this.#session.closed && !this.#session.destroyed && id === this.#sessionFor) return this.#session;
    this.#session?.destroy();
    const session = connect(this.endpoint, { ca, cert, key });
    // A failed session fails its request (whose error then says less: the TLS failure is the session's); the next call makes another.
    session.on("error", (e) => (this.#sessionError = e));
    this.#sessionError = null;
    session.unref();
    this.#session = session;
    this.#sessionFor = id;
    return session;
  }

  #unary(path: string): Promise<EtcdResult<Uint8Array>> {
    return new Promise((resolve) => {
      const fail = (message: string, grpcCode?: number) => {
        const error: EtcdError = {
          kind: grpcCode === undefined ? "unavailable" : classifyEtcdError(message, grpcCode),
          message,
          httpStatus: grpcCode === undefined ? 0 : 200,
          grpcCode,
          endpoint: this.endpoint,
        };
        resolve({ ok: false, error });
      };
      let session: ClientHttp2Session;
      try {
        session = this.#sessionNow();
      } catch (e) {
        fail(`cannot read etcd's TLS files: ${(e as Error).message}`);
        return;
      }
      const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
      const timer = setTimeout(() => {
        req.close();
        this.close();
        fail(`${this.endpoint}: timed out`);
      }, this.#timeoutMs);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let message = "";
      const take = (h: Record<string, unknown>) => {
        if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
        if (h["grpc-message"] !== undefined) message = decodeURIComponent(String(h["grpc-message"]));
      };
      req.on("response", take);
      req.on("trailers", take);
      req.on("data", (c: Buffer) => chunks.push(c));
      let errored = false;
      req.on("error", (e) => {
        errored = true;
        clearTimeout(timer);
        // The session's own error (a TLS failure) may come a moment after the stream's.
        setImmediate(() => {
          const sessionError = this.#sessionError;
          this.close();
          // A certificate refused in the handshake, in the words tls-fetch.ts gives it (naming the file).
          const host = new URL(this.endpoint).host;
          const handshake = (sessionError ? tlsHandshakeError(sessionError, host, this.#files) : null) ?? tlsHandshakeError(e, host, this.#files);
          if (handshake) {
            this.#onHandshakeError?.(handshake);
            return fail(handshake.message);
          }
          fail(`${this.endpoint}: ${(sessionError as NodeJS.ErrnoException | null)?.code ?? (e as NodeJS.ErrnoException).code ?? e.message}`);
        });
      });
      req.on("close", () => {
        clearTimeout(timer);
        if (errored) return;
        if (status === undefined) return fail(`${this.endpoint}: the stream ended without a gRPC status`);
        if (status !== "0") return fail(message || `gRPC status ${status}`, Number(status));
        const body = Buffer.concat(chunks);
        // One length-prefixed message: a compressed-flag byte, four bytes of length.
        if (body.length < 5 || body[0] !== 0) return fail(`${this.endpoint}: not one uncompressed gRPC message`);
        resolve({ ok: true, value: new Uint8Array(body.subarray(5, 5 + body.readUInt32BE(1))), endpoint: this.endpoint });
      });
      req.end(Buffer.alloc(5)); // the empty request message
    });
  }
}

type Fields = Map<number, (bigint | Uint8Array)[]>;

/** The fields of one protobuf message: varints as bigint, length-delimited as bytes (fixed-size ones skipped). */
function decode(buf: Uint8Array): Fields {
  const out: Fields = new Map();
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (i >= buf.length) throw new Error("a protobuf varint runs past the message");
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return result;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    const no = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    let value: bigint | Uint8Array;
    if (wire === 0) value = varint();
    else if (wire === 2) {
      const len = Number(varint());
      value = buf.subarray(i, i + len);
      i += len;
    } else if (wire === 1) {
      i += 8;
      continue;
    } else if (wire === 5) {
      i += 4;
      continue;
    } else throw new Error(`protobuf wire type ${wire} is not one etcd's messages use`);
    out.set(no, [...(out.get(no) ?? []), value]);
  }
  return out;
}

function uint(f: Fields, no: number): string {
  const v = f.get(no)?.at(-1);
  return typeof v === "bigint" ? v.toString() : "0";
}

function text(f: Fields, no: number): string {
  const v = f.get(no)?.at(-1);
  return v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : "";
}

function texts(f: Fields, no: number): string[] {
  return (f.get(no) ?? []).filter((v): v is Uint8Array => v instanceof Uint8Array).map((v) => Buffer.from(v).toString("utf8"));
}

function header(f: Fields): ResponseHeader {
  const raw = f.get(1)?.at(-1);
  const h = raw instanceof Uint8Array ? decode(raw) : new Map();
  return { clusterId: uint(h, 1), memberId: uint(h, 2), revision: uint(h, 3), raftTerm: uint(h, 4) };
}

/** What a node asks its own etcd: its status, the member list, and `GET /health`. */
export interface EtcdReads {
  status(endpoint?: string): Promise<EtcdResult<EtcdStatus>>;
  memberList(): Promise<EtcdResult<MemberListResult>>;
  health(endpoint: string): Promise<boolean>;
}

/** Status and member list over gRPC (a node's certificate is a client etcd can name there), health from etcd's /health. */
export function grpcReads(
  endpoint: string,
  files: TlsFiles,
  health: (endpoint: string) => Promise<boolean>,
  options: { timeoutMs?: number; onHandshakeError?: (e: TlsHandshakeError) => void } = {},
): EtcdReads {
  const reads = new EtcdGrpcReads(endpoint, files, options);
  return {
    status: () => reads.status(),
    memberList: () => reads.memberList(),
    health,
  };
}
