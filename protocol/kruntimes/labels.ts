// Kubernetes' rules for metadata.labels (apimachinery's ValidateLabels: a qualified name as key, a
// short alphanumeric value), in one place for every writer of a Run's labels: the local Runs API
// admits a create or merge patch with them as an API server does (422 with the field and the rule),
// and clients check a label before they send it.
import { z } from 'zod';

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME_RULE = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** Why `key` is not a label key (a qualified name: `[prefix/]name`), or undefined when it is one. */
export function labelKeyProblem(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return `a qualified name ${NAME_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`;
  const name = parts.length === 2 ? (parts[1] as string) : key;
  const prefix = parts.length === 2 ? (parts[0] as string) : undefined;
  if (prefix !== undefined) {
    if (prefix.length === 0) return 'prefix part must be non-empty';
    if (prefix.length > 253) return 'prefix part must be no more than 253 characters';
    if (!DNS_SUBDOMAIN.test(prefix)) return "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'";
  }
  if (name.length === 0) return 'name part must be non-empty';
  if (name.length > 63) return 'name part must be no more than 63 characters';
  if (!NAME_PART.test(name)) return `name part ${NAME_RULE}`;
  return undefined;
}

/** Why `value` is not a label value (empty, or ≤ 63 characters of the name rule), or undefined. */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > 63) return 'must be no more than 63 characters';
  if (value !== '' && !NAME_PART.test(value)) return `a valid label ${NAME_RULE}`;
  return undefined;
}

/** The first invalid label of `labels` as `metadata.labels` field errors (Kubernetes' words), or undefined. */
export function labelsProblem(labels: Record<string, unknown>): { field: string; message: string } | undefined {
  for (const [key, value] of Object.entries(labels)) {
    const keyProblem = labelKeyProblem(key);
    if (keyProblem) return { field: 'metadata.labels', message: `Invalid value: ${JSON.stringify(key)}: ${keyProblem}` };
    if (typeof value !== 'string') return { field: `metadata.labels.${key}`, message: `Invalid value: ${JSON.stringify(value)}: a label value must be a string` };
    const valueProblem = labelValueProblem(value);
    if (valueProblem) return { field: 'metadata.labels', message: `Invalid value: ${JSON.stringify(value)}: ${valueProblem}` };
  }
  return undefined;
}

/** Labels as a schema: every key and value by Kubernetes' rules. */
export const LabelsSchema = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  const problem = labelsProblem(labels);
  if (problem) ctx.addIssue({ code: 'custom', message: `${problem.field}: ${problem.message}` });
});
