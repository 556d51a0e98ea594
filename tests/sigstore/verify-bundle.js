// Verify a Sigstore bundle with @sigstore/verify (the Sigstore JavaScript client),
// trusting only a public key: no transparency log, no timestamp authority.
// Usage: NODE_PATH=<dir>/node_modules node verify-bundle.js BUNDLE.json PUB.pem
// Prints one JSON line: {"verified": true, ...} (exit 0) or {"verified": false,
// "error": "..."} (exit 1). Trust material as issue #28 found works: an empty
// trusted root plus {[hint]: {rawBytes: <DER SubjectPublicKeyInfo>}}, and
// thresholds of 0 (the defaults ask for a timestamp: "expected 1 timestamps, got 0").
'use strict';
const fs = require('fs');
const crypto = require('crypto');
const { bundleFromJSON } = require('@sigstore/bundle');
const { Verifier, toSignedEntity, toTrustMaterial } = require('@sigstore/verify');

const [bundlePath, pubPath] = process.argv.slice(2);
try {
  const doc = JSON.parse(fs.readFileSync(bundlePath, 'utf8'));
  const bundle = bundleFromJSON(doc);
  const spki = crypto.createPublicKey(fs.readFileSync(pubPath)).export({ type: 'spki', format: 'der' });
  const hint = bundle.verificationMaterial.content.publicKey.hint;
  const emptyRoot = {
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [], certificateAuthorities: [], ctlogs: [], timestampAuthorities: [],
  };
  const trust = toTrustMaterial(emptyRoot, { [hint]: { rawBytes: spki } });
  const verifier = new Verifier(trust, { tlogThreshold: 0, timestampThreshold: 0 });
  verifier.verify(toSignedEntity(bundle));
  const payload = JSON.parse(Buffer.from(bundle.content.dsseEnvelope.payload).toString('utf8'));
  console.log(JSON.stringify({
    verified: true,
    mediaType: bundle.mediaType,
    hint,
    payloadType: bundle.content.dsseEnvelope.payloadType,
    predicateType: payload.predicateType,
    subject: payload.subject,
  }));
} catch (e) {
  console.log(JSON.stringify({ verified: false, error: `${e.name}: ${e.message}` }));
  process.exit(1);
}
