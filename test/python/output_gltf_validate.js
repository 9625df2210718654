#!/usr/bin/env node
// Validates a .glb/.gltf with the Khronos glTF validator (npm "gltf-validator")
// and prints its report as JSON on stdout. Exit status: 0 when the report has
// no errors, 1 when it has, 2 when the validator could not run.
//
//   node output_gltf_validate.js FILE [NODE_MODULES_DIR]
//
// NODE_MODULES_DIR (or $TRELLIS_GLTF_VALIDATOR_DIR) is where gltf-validator is
// installed; scripts/install-deps.sh --test puts it in
// <repo>/build-deps/node/node_modules.
'use strict';
const fs = require('fs');
const path = require('path');

const file = process.argv[2];
const modules = process.argv[3] || process.env.TRELLIS_GLTF_VALIDATOR_DIR ||
  path.join(__dirname, '..', '..', 'build-deps', 'node', 'node_modules');
if (!file) {
  console.error('usage: node output_gltf_validate.js FILE [NODE_MODULES_DIR]');
  process.exit(2);
}
let validator;
try {
  validator = require(path.join(modules, 'gltf-validator'));
} catch (e) {
  console.error(`cannot load gltf-validator from ${modules}: ${e.message}`);
  process.exit(2);
}
const bytes = new Uint8Array(fs.readFileSync(file));
validator.validateBytes(bytes, {
  uri: path.basename(file),
  maxIssues: 0, // report every issue
  writeTimestamp: false,
}).then((report) => {
  console.log(JSON.stringify(report, null, 2));
  process.exit(report.issues.numErrors > 0 ? 1 : 0);
}, (err) => {
  console.error(`gltf-validator failed on ${file}: ${err}`);
  process.exit(2);
});
