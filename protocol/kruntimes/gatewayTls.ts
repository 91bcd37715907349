// TLS for a Run's gateway endpoint, set up once for both transports of the session client (the
// undici Agent for HTTP, the `ws` socket for era D): the Run's `status.endpoint.caBundle` (base64
// of PEM, as the Run carries it, or PEM itself) and the adjustments a port-forwarded loopback
// hop needs (a servername that names the Service, or no verification when asked explicitly).

export interface GatewayTlsAdjustments {
  rejectUnauthorized?: boolean;
  servername?: string;
}

/** The `tls.connect` options both transports pass on: only the keys that are set. */
export interface GatewayTlsOptions {
  ca?: string;
  rejectUnauthorized?: false;
  servername?: string;
}

/** PEM text from a Run's caBundle (base64 of PEM, or PEM already). */
export function decodeCaBundle(caBundle: string): string {
  const trimmed = caBundle.trim();
  if (trimmed.startsWith('-----BEGIN')) return trimmed;
  return Buffer.from(trimmed, 'base64').toString('utf8');
}

export function gatewayTlsOptions(caBundle: string | undefined, adjust: GatewayTlsAdjustments | undefined): GatewayTlsOptions {
  return {
    ...(caBundle ? { ca: decodeCaBundle(caBundle) } : {}),
    ...(adjust?.rejectUnauthorized === false ? { rejectUnauthorized: false as const } : {}),
    ...(adjust?.servername ? { servername: adjust.servername } : {}),
  };
}
