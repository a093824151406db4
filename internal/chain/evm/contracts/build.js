// Compiles the dev contracts into the .abi and .bin files committed beside them (and
// DevRevert's runtime code, which the dev chains hold at 0x…dEaD from genesis). Run it
// only after changing a .sol file; no build step runs it:
//   npm install --prefix /tmp/solc solc@0.8.37 && NODE_PATH=/tmp/solc/node_modules node build.js
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const names = ['DevToken', 'DevRevert', 'DevSwapRouter', 'DevVault', 'DevLendingPool', 'DevPriceFeed', 'DevBatchTransfer'];
const sources = {};
for (const n of names) sources[n + '.sol'] = { content: fs.readFileSync(path.join(__dirname, n + '.sol'), 'utf8') };
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors || []).filter((e) => e.severity === 'error');
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
for (const n of names) {
  const c = out.contracts[n + '.sol'][n];
  fs.writeFileSync(path.join(__dirname, n + '.abi'), JSON.stringify(c.abi) + '\n');
  fs.writeFileSync(path.join(__dirname, n + '.bin'), c.evm.bytecode.object + '\n');
  if (n === 'DevRevert') fs.writeFileSync(path.join(__dirname, n + '.runtime.bin'), c.evm.deployedBytecode.object + '\n');
}
console.log('compiled with solc ' + solc.version());
