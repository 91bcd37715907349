// Metadata that OpenSandbox accepts (Kubernetes label rules: values ≤ 63 characters of
// [A-Za-z0-9-_.], alphanumeric at both ends — no `:`, `/`, spaces or timestamps) and that lets
// this product find its own sandboxes again: product, session and activation.
import crypto from 'node:crypto';

export const LABEL_PRODUCT = 'sandbox-sessions.io/product';
export const LABEL_SESSION = 'sandbox-sessions.io/session';
export const LABEL_ACTIVATION = 'sandbox-sessions.io/activation';
/** The local Run a sandbox serves (its UID): how a restarted daemon finds sandboxes a crash left without a record. */
export const LABEL_RUN = 'sandbox-sessions.io/run';
export const PRODUCT = 'sandbox-sessions';

const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** `raw` itself when it is a valid label value, else a readable, deterministic, label-safe form. */
export function labelValue(raw: string): string {
  if (raw.length <= 63 && LABEL_VALUE.test(raw)) return raw;
  const hash = crypto.createHash('sha256').update(raw).digest('hex').slice(0, 12);
  const readable = raw.replace(/[^-A-Za-z0-9_.]+/g, '-').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '').slice(0, 50).replace(/[^A-Za-z0-9]+$/, '');
  return readable ? `${readable}-${hash}` : `h-${hash}`;
}

export function isLabelValue(v: string): boolean {
  return v.length <= 63 && LABEL_VALUE.test(v);
}

export function productMetadata(ids: { session?: string; activation?: string; run?: string }): Record<string, string> {
  const out: Record<string, string> = { [LABEL_PRODUCT]: PRODUCT };
  if (ids.run !== undefined) out[LABEL_RUN] = labelValue(ids.run);
  if (ids.session !== undefined) out[LABEL_SESSION] = labelValue(ids.session);
  if (ids.activation !== undefined) out[LABEL_ACTIVATION] = labelValue(ids.activation);
  return out;
}
