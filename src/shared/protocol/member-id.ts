/**
 * etcd member (and cluster) IDs are uint64. etcd's JSON gateway spells them in decimal; etcd's
 * logs and `etcdctl` in hex. Whatever a person reads shows hex, so that it matches etcdctl;
 * JSON keeps the decimal form it always had (and may add the hex one beside it).
 * @module
 */

/** The hex spelling of a decimal ID (as etcdctl prints it); a non-decimal value unchanged. */
export function memberIdHex(id: string): string {
  if (!/^[0-9]{1,20}$/.test(id)) return id;
  const n = BigInt(id);
  return n < 2n ** 64n ? n.toString(16) : id;
}
