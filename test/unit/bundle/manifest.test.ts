// manifest.json (spec §1.2): golden JCS bytes, exact key sets, and byte-compared decoding.
import assert from 'node:assert/strict';
import type { SessionBundleManifestV1 } from '../../../protocol/bundle';
import { SessionBundleError } from '../../../server/bundle/errors';
import { decodeManifest, encodeManifest } from '../../../server/bundle/manifest';

const GOLDEN_TEXT =
  '{"codec":{"archive":"ustar","canonicalizationVersion":1,"compression":"zstd","compressionLevel":3,"name":"maka-session-bundle","version":1},' +
  '"envelope":{"lastCommittedActivationId":"activation-7","sessionId":"cloud-session-α"},' +
  `"payload":{"entryCount":5,"payloadBytes":37,"statePath":"state/","treeDigest":"sha256:${'ab'.repeat(32)}","workspacePath":"workspace/"},` +
  '"schemaVersion":1,"stateIdentity":{"mediaType":"application/vnd.maka.session-state-identity+json;version=1","path":"state-identity.json"}}';

function golden(): SessionBundleManifestV1 {
  return {
    schemaVersion: 1,
    codec: { name: 'maka-session-bundle', version: 1, canonicalizationVersion: 1, archive: 'ustar', compression: 'zstd', compressionLevel: 3 },
    envelope: { sessionId: 'cloud-session-α', lastCommittedActivationId: 'activation-7' },
    stateIdentity: { path: 'state-identity.json', mediaType: 'application/vnd.maka.session-state-identity+json;version=1' },
    payload: { statePath: 'state/', workspacePath: 'workspace/', treeDigest: `sha256:${'ab'.repeat(32)}`, payloadBytes: 37, entryCount: 5 },
  };
}

function code(fn: () => unknown): { code: string; message: string; cause: unknown } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SessionBundleError, String(err));
    return { code: err.code, message: err.message, cause: err.cause };
  }
  assert.fail('expected a SessionBundleError');
}

const decodeText = (text: string) => code(() => decodeManifest(Buffer.from(text, 'utf8')));
const mutate = (f: (m: Record<string, unknown> & { payload: Record<string, unknown>; envelope: Record<string, unknown>; codec: Record<string, unknown> }) => void): string => {
  const value = JSON.parse(GOLDEN_TEXT) as Parameters<typeof f>[0];
  f(value);
  const sortKeys = (v: unknown): unknown =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]))
      : v;
  return JSON.stringify(sortKeys(value));
};

describe('bundle/manifest', () => {
  it('encodes the golden JCS text, raw UTF-8', () => {
    const bytes = encodeManifest(golden());
    assert.equal(bytes.toString('utf8'), GOLDEN_TEXT);
    assert.deepEqual(decodeManifest(bytes), golden());
  });

  it('omits an absent activation id and ignores inherited properties', () => {
    const m = golden();
    const envelope = Object.create({ lastCommittedActivationId: 'inherited', extra: 1 }) as SessionBundleManifestV1['envelope'];
    envelope.sessionId = 'cloud-session-α';
    const text = encodeManifest({ ...m, envelope }).toString('utf8');
    assert.ok(!text.includes('lastCommittedActivationId'));
    assert.ok(!text.includes('inherited'));
    assert.equal(decodeManifest(Buffer.from(text)).envelope.lastCommittedActivationId, undefined);
  });

  it('rejects non-canonical bytes: whitespace, reordering, BOM, newline, duplicates, number spellings', () => {
    const variants = [
      GOLDEN_TEXT.replace('{"codec"', '{ "codec"'),
      GOLDEN_TEXT + '\n',
      '\ufeff' + GOLDEN_TEXT,
      GOLDEN_TEXT.replace('"schemaVersion":1,', '"schemaVersion":1,"schemaVersion":1,'),
      GOLDEN_TEXT.replace('"entryCount":5', '"entryCount":5.0'),
      GOLDEN_TEXT.replace('"entryCount":5', '"entryCount":5e0'),
      GOLDEN_TEXT.replace('"sessionId":"cloud-session-α"', '"sessionId":"cloud-session-\\u03b1"'),
      GOLDEN_TEXT.replace('{"archive":"ustar","canonicalizationVersion":1', '{"canonicalizationVersion":1,"archive":"ustar"'),
    ];
    for (const text of variants) assert.equal(decodeText(text).code, 'invalid_manifest', text.slice(0, 40));
  });

  it('never exposes parser text', () => {
    const err = decodeText('[');
    assert.equal(err.code, 'invalid_manifest');
    assert.equal(err.cause, undefined);
    assert.ok(!/JSON at position|Unexpected/.test(err.message), err.message);
    assert.equal(code(() => decodeManifest(Buffer.from([0x7b, 0xff, 0x7d]))).code, 'invalid_manifest');
  });

  it('rejects revision, head and forkedFrom at the top level and inside payload', () => {
    for (const key of ['revision', 'head', 'forkedFrom']) {
      assert.equal(decodeText(mutate((m) => (m[key] = 1))).code, 'invalid_manifest', key);
      assert.equal(decodeText(mutate((m) => (m.payload[key] = 1))).code, 'invalid_manifest', `payload.${key}`);
    }
  });

  it('distinguishes unsupported schema, unsupported codec and malformed', () => {
    assert.equal(decodeText(mutate((m) => (m.schemaVersion = 2))).code, 'unsupported_schema');
    assert.equal(decodeText(mutate((m) => (m.schemaVersion = '1'))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.schemaVersion = 1.5))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.codec.compressionLevel = 19))).code, 'unsupported_codec');
    assert.equal(decodeText(mutate((m) => (m.codec.name = 'other'))).code, 'unsupported_codec');
    assert.equal(decodeText(mutate((m) => (m.codec.extra = 1))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => delete m.codec.archive)).code, 'invalid_manifest');
  });

  it('rejects unknown nested keys, bad Unicode, bad digests, entryCount 2 and an explicit null', () => {
    assert.equal(decodeText(mutate((m) => (m.envelope.other = 'x'))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.envelope.lastCommittedActivationId = null))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.envelope.sessionId = ''))).code, 'invalid_manifest');
    assert.equal(decodeText(GOLDEN_TEXT.replace('cloud-session-α', 'cloud-\\ud800')).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.payload.treeDigest = `sha256:${'AB'.repeat(32)}`))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.payload.entryCount = 2))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.payload.payloadBytes = -1))).code, 'invalid_manifest');
    assert.equal(decodeText(mutate((m) => (m.payload.statePath = 'state'))).code, 'invalid_manifest');
    assert.equal(decodeManifest(Buffer.from(mutate((m) => (m.payload.entryCount = 3)))).payload.entryCount, 3);
  });
});
