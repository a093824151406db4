'use strict';
// devsvm: Solana's own runtime (litesvm, pinned in package.json) behind the JSON-RPC methods a
// Solana client needs, for the dev bundle and the tests. Programs run in the real SVM with the
// real SPL Token, Token-2022 and associated-token-account programs; what litesvm lacks (slots,
// blockhash expiry, signature statuses, transaction history that survives a restart) is here.
//
//   node server.js --port 0 --state /path/state.json --slot-ms 400
//
// Prints one line, `devsvm listening on http://127.0.0.1:PORT`, once ready; logs go to stderr as
// `info: …`, `warn: …`, `error: …`. Exits, saving its state, on SIGTERM or SIGINT, and with
// --exit-with-stdin also when its standard input closes: a parent that holds the other end
// and dies, even by SIGKILL, takes the server along.
//
// Standard methods, in Solana's shapes: getHealth getVersion getGenesisHash getSlot
// getBlockHeight getEpochInfo getLatestBlockhash isBlockhashValid getBalance getAccountInfo
// getMultipleAccounts getTokenAccountBalance getTokenAccountsByOwner getTokenSupply
// getMinimumBalanceForRentExemption getFeeForMessage getRecentPrioritizationFees
// simulateTransaction sendTransaction getSignatureStatuses getTransaction requestAirdrop.
// Commitments as on Solana: `processed` is the current slot, `confirmed` one behind, `finalized`
// (the default) 32 behind; they choose the slot (and so the blockhash) that getSlot,
// getBlockHeight, getEpochInfo and getLatestBlockhash answer, and when getTransaction sees a
// transaction. Account reads always show the latest state (litesvm keeps no older one).
//
// sendTransaction, in order: malformed → -32602; a bad signature → -32003; a signature already
// on the chain → that signature again, nothing run (a rebroadcast); a blockhash not among the
// last 151 slots' → -32002 "Blockhash not found" (err BlockhashNotFound), or with skipPreflight
// the signature and nothing run, as a leader drops it; unless skipPreflight, a simulation that fails → -32002 "Transaction simulation failed: …" with {err, logs}, nothing
// recorded; else it runs, and one that fails in execution lands all the same, paying its fee,
// its status recorded with the error (Solana's shapes, e.g. {"InstructionError":[1,{"Custom":17}]}).
//
// Dev methods:
//   devsvm_info []                       → {genesisHash, slot, slotMs, usdcMint, usdcDecimals,
//                                           frozenOwner, frozenTokenAccount}
//   devsvm_mintTo [owner, baseUnits]     → the owner's USDC balance after minting, base units as
//                                           a string; creates its associated token account first
//   devsvm_advanceSlots [n]              → the new slot (n slots at once, for tests)
//
// Chain rules: one slot every --slot-ms; block height = slot. The blockhash of slot s is
// base58(sha256(genesisHash ‖ u64le(s))), valid while the current slot is within s … s+150.
// The USDC-like mint (6 decimals) and a frozen payee are made at first start by transactions.
// State (touched accounts, slot, genesis hash, signatures and their transactions) is written to
// --state (a second after a change, every 10 s for the slot alone, and on exit), and restored
// on start.

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');

// The native binding under litesvm's TypeScript wrapper: it takes and returns raw bytes, which
// is what a JSON-RPC server holds, where the wrapper converts everything to @solana/kit types.
const lsvm = require('litesvm/dist/internal');
const LITESVM_VERSION = require('litesvm/package.json').version;

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs(argv) {
  const o = { port: 0, state: '', slotMs: 400, exitWithStdin: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--port') o.port = Number(argv[++i]);
    else if (argv[i] === '--state') o.state = argv[++i];
    else if (argv[i] === '--slot-ms') o.slotMs = Number(argv[++i]);
    else if (argv[i] === '--exit-with-stdin') o.exitWithStdin = true;
    else throw new Error(`unknown argument ${argv[i]}: use --port N --state FILE --slot-ms N [--exit-with-stdin]`);
  }
  if (!o.state) throw new Error('--state FILE is required');
  if (!(o.slotMs > 0)) throw new Error('--slot-ms must be a positive number');
  return o;
}

const log = (level, msg) => process.stderr.write(`${level}: ${msg}\n`);

// ---------------------------------------------------------------------------------------------
// Encodings

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

// Digit by digit rather than through a BigInt, which is ten times slower, and the server
// encodes a blockhash every slot and every key of every answer.
function b58(buf) {
  const digits = []; // base 58, least significant first
  for (const byte of buf) {
    let carry = byte;
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j] << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    for (; carry > 0; carry = (carry / 58) | 0) digits.push(carry % 58);
  }
  let s = '';
  for (const b of buf) { if (b !== 0) break; s += '1'; }
  for (let i = digits.length - 1; i >= 0; i--) s += ALPHABET[digits[i]];
  return s;
}

function unb58(s) {
  if (typeof s !== 'string') throw new Error('not a string');
  let n = 0n;
  for (const c of s) {
    const i = ALPHABET.indexOf(c);
    if (i < 0) throw new Error(`invalid base58 character ${JSON.stringify(c)}`);
    n = n * 58n + BigInt(i);
  }
  const out = [];
  while (n > 0n) { out.unshift(Number(n % 256n)); n /= 256n; }
  for (const c of s) { if (c !== '1') break; out.unshift(0); }
  return Buffer.from(out);
}

// JSON with u64s: Solana answers lamports, rentEpoch (u64::MAX) and the like as plain numbers,
// beyond what a JS number holds, so BigInts are written as their digits.
function toJSON(v) {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'bigint': return v.toString();
    case 'number': return Number.isFinite(v) ? String(v) : 'null';
    case 'boolean': return v ? 'true' : 'false';
    case 'string': return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(toJSON).join(',') + ']';
  return '{' + Object.keys(v).filter((k) => v[k] !== undefined)
    .map((k) => JSON.stringify(k) + ':' + toJSON(v[k])).join(',') + '}';
}

const sha256 = (...parts) => crypto.createHash('sha256').update(Buffer.concat(parts)).digest();

function u64le(n) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return b; }

// ---------------------------------------------------------------------------------------------
// Keys

const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

function keypair(seed) {
  const priv = crypto.createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: 'der', type: 'pkcs8' });
  const pub = Buffer.from(crypto.createPublicKey(priv).export({ format: 'der', type: 'spki' }).subarray(SPKI_ED25519.length));
  return { priv, pub };
}

function verify(pub, msg, sig) {
  try {
    const key = crypto.createPublicKey({ key: Buffer.concat([SPKI_ED25519, pub]), format: 'der', type: 'spki' });
    return crypto.verify(null, msg, key, sig);
  } catch {
    return false;
  }
}

// A program address must not be an ed25519 point; Solana asks curve25519-dalek whether the 32
// bytes decompress, i.e. whether x² = (y²−1)/(d·y²+1) has a root mod p (y reduced mod p).
const P = 2n ** 255n - 19n;
const D = (-121665n * modpow(121666n, P - 2n)) % P + P;
function modpow(b, e) { let r = 1n; b %= P; for (; e > 0n; e >>= 1n, b = (b * b) % P) if (e & 1n) r = (r * b) % P; return r; }
function onCurve(bytes) {
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? bytes[i] & 0x7f : bytes[i]);
  y %= P;
  const y2 = (y * y) % P;
  const u = (y2 - 1n + P) % P;
  const v = (D * y2 + 1n) % P;
  const x2 = (u * modpow(v, P - 2n)) % P;
  return x2 === 0n || modpow(x2, (P - 1n) / 2n) === 1n;
}

function findProgramAddress(seeds, programId) {
  for (let bump = 255; bump >= 0; bump--) {
    const h = sha256(...seeds, Buffer.from([bump]), programId, Buffer.from('ProgramDerivedAddress'));
    if (!onCurve(h)) return h;
  }
  throw new Error('no program address');
}

const SYSTEM = Buffer.alloc(32);
const TOKEN = unb58('TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA');
const TOKEN_2022 = unb58('TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb');
const ATA_PROGRAM = unb58('ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL');
const MEMO = unb58('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
const COMPUTE_BUDGET = unb58('ComputeBudget111111111111111111111111111111');
// Accounts not to save: programs and sysvars come with litesvm itself.
const NOT_SAVED_OWNERS = new Set(['NativeLoader1111111111111111111111111111111', 'Sysvar1111111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111', 'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111', 'LoaderV411111111111111111111111111111111111']);
// Programs whose instructions the runtime budgets at 3,000 compute units rather than 200,000.
const BUILTINS = new Set(['11111111111111111111111111111111', 'ComputeBudget111111111111111111111111111111',
  'Vote111111111111111111111111111111111111111', 'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111', 'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111', 'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111', 'Secp256r1SigVerify1111111111111111111111111']);

const ata = (owner, mint, program = TOKEN) => findProgramAddress([owner, program, mint], ATA_PROGRAM);

const seeded = (label) => keypair(sha256(Buffer.from(label)));
const FAUCET = seeded('treasury dev faucet');
const USDC_MINT = seeded('treasury dev usdc mint');
const USDC_AUTHORITY = seeded('treasury dev usdc mint authority');
const FROZEN_OWNER = seeded('treasury dev frozen payee');
const USDC_DECIMALS = 6;
const FROZEN_ATA = ata(FROZEN_OWNER.pub, USDC_MINT.pub);

const MAX_AGE = 150; // slots a blockhash stays valid, as Solana's MAX_PROCESSING_AGE
const FINALIZED_DEPTH = 32;
const FEE_PER_SIGNATURE = 5000n;

// ---------------------------------------------------------------------------------------------
// Transactions on the wire

function readShortVec(buf, o) {
  let n = 0;
  for (let i = 0; i < 3; i++) {
    if (o.i >= buf.length) throw new Error('truncated');
    const b = buf[o.i++];
    n |= (b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return n;
  }
  throw new Error('bad compact-u16');
}

function take(buf, o, n) {
  if (o.i + n > buf.length) throw new Error('truncated');
  const s = buf.subarray(o.i, o.i + n);
  o.i += n;
  return s;
}

// A transaction (legacy or v0) as its parts; throws on anything malformed.
function parseTx(raw) {
  const o = { i: 0 };
  const signatures = [];
  for (let n = readShortVec(raw, o); n > 0; n--) signatures.push(take(raw, o, 64));
  const messageStart = o.i;
  let version = 'legacy';
  if (raw[o.i] & 0x80) {
    version = raw[o.i++] & 0x7f;
    if (version !== 0) throw new Error(`unsupported transaction version ${version}`);
  }
  const header = [...take(raw, o, 3)];
  const keys = [];
  for (let n = readShortVec(raw, o); n > 0; n--) keys.push(take(raw, o, 32));
  const blockhash = take(raw, o, 32);
  const instructions = [];
  for (let n = readShortVec(raw, o); n > 0; n--) {
    const programIndex = take(raw, o, 1)[0];
    const accounts = [...take(raw, o, readShortVec(raw, o))];
    const data = take(raw, o, readShortVec(raw, o));
    instructions.push({ programIndex, accounts, data });
  }
  const lookups = [];
  if (version === 0) {
    for (let n = readShortVec(raw, o); n > 0; n--) {
      const table = take(raw, o, 32);
      const writable = [...take(raw, o, readShortVec(raw, o))];
      const readonly = [...take(raw, o, readShortVec(raw, o))];
      lookups.push({ table, writable, readonly });
    }
  }
  if (o.i !== raw.length) throw new Error('trailing bytes');
  if (signatures.length === 0 || signatures.length !== header[0]) throw new Error('signature count does not match the message header');
  if (keys.length < header[0]) throw new Error('fewer account keys than signatures');
  for (const ix of instructions) if (ix.programIndex >= keys.length) throw new Error('instruction program index out of range');
  return { raw, signatures, message: raw.subarray(messageStart), version, header, keys, blockhash, instructions, lookups };
}

// The static keys followed by those loaded from lookup tables (writable, then read-only), the
// order in which a transaction's balances are reported.
function accountKeys(tx) {
  const writable = [], readonly = [];
  for (const l of tx.lookups) {
    const acc = svm.getAccount(l.table);
    const data = acc ? Buffer.from(acc.data()) : Buffer.alloc(0);
    const at = (i) => (56 + 32 * (i + 1) <= data.length ? data.subarray(56 + 32 * i, 56 + 32 * (i + 1)) : null);
    for (const i of l.writable) { const k = at(i); if (k) writable.push(k); }
    for (const i of l.readonly) { const k = at(i); if (k) readonly.push(k); }
  }
  return { all: [...tx.keys, ...writable, ...readonly], loaded: { writable: writable.map(b58), readonly: readonly.map(b58) } };
}

// Solana's fee: 5,000 lamports a signature (precompile signatures included) plus the priority
// fee, compute-unit price × limit, the limit defaulting per instruction as the runtime does.
function feeFor(tx) {
  let sigs = BigInt(tx.header[0]);
  let price = 0n, limit = null, defaultLimit = 0;
  for (const ix of tx.instructions) {
    const program = b58(tx.keys[ix.programIndex]);
    if (program === 'Ed25519SigVerify111111111111111111111111111' || program === 'KeccakSecp256k11111111111111111111111111111'
      || program === 'Secp256r1SigVerify1111111111111111111111111') sigs += BigInt(ix.data[0] || 0);
    if (program === 'ComputeBudget111111111111111111111111111111') {
      if (ix.data[0] === 2 && ix.data.length >= 5) limit = BigInt(ix.data.readUInt32LE(1));
      if (ix.data[0] === 3 && ix.data.length >= 9) price = ix.data.readBigUInt64LE(1);
    }
    defaultLimit += BUILTINS.has(program) ? 3000 : 200000;
  }
  const units = BigInt(Math.min(1400000, limit === null ? defaultLimit : Number(limit)));
  return sigs * FEE_PER_SIGNATURE + (price * units + 999999n) / 1000000n;
}

// A legacy transaction of our own (setup, airdrops, minting), signed by the given keypairs.
function buildTx(payer, instructions, blockhash, signers) {
  const metas = new Map();
  const add = (k, s, w) => {
    const h = k.toString('hex');
    const m = metas.get(h);
    if (m) { m.s ||= s; m.w ||= w; } else metas.set(h, { k, s, w });
  };
  add(payer.pub, true, true);
  for (const ix of instructions) {
    for (const a of ix.keys) add(a[0], a[1], a[2]);
    add(ix.program, false, false);
  }
  const rank = (m) => (m.k.equals(payer.pub) ? 0 : m.s ? (m.w ? 1 : 2) : (m.w ? 3 : 4));
  const all = [...metas.values()].sort((a, b) => rank(a) - rank(b));
  const index = (k) => all.findIndex((m) => m.k.equals(k));
  const shortVec = (n) => Buffer.from(n < 128 ? [n] : [(n & 0x7f) | 0x80, n >> 7]);
  const parts = [Buffer.from([all.filter((m) => m.s).length, all.filter((m) => m.s && !m.w).length,
    all.filter((m) => !m.s && !m.w).length]), shortVec(all.length), ...all.map((m) => m.k), blockhash, shortVec(instructions.length)];
  for (const ix of instructions) {
    parts.push(Buffer.from([index(ix.program)]), shortVec(ix.keys.length), Buffer.from(ix.keys.map((a) => index(a[0]))),
      shortVec(ix.data.length), ix.data);
  }
  const message = Buffer.concat(parts);
  const sigs = all.filter((m) => m.s).map((m) => {
    const kp = [payer, ...signers].find((s) => s.pub.equals(m.k));
    return crypto.sign(null, message, kp.priv);
  });
  return Buffer.concat([shortVec(sigs.length), ...sigs, message]);
}

const ix = {
  // Accounts are [pubkey, isSigner, isWritable].
  transfer: (from, to, lamports) => ({ program: SYSTEM, keys: [[from, true, true], [to, false, true]],
    data: Buffer.concat([Buffer.from([2, 0, 0, 0]), u64le(lamports)]) }),
  createAccount: (from, to, lamports, space, owner) => ({ program: SYSTEM, keys: [[from, true, true], [to, true, true]],
    data: Buffer.concat([Buffer.from([0, 0, 0, 0]), u64le(lamports), u64le(space), owner]) }),
  initializeMint2: (mint, decimals, authority, freeze) => ({ program: TOKEN, keys: [[mint, false, true]],
    data: Buffer.concat([Buffer.from([20, decimals]), authority, Buffer.from([1]), freeze]) }),
  createAtaIdempotent: (payer, owner, mint) => ({ program: ATA_PROGRAM, data: Buffer.from([1]),
    keys: [[payer, true, true], [ata(owner, mint), false, true], [owner, false, false], [mint, false, false],
      [SYSTEM, false, false], [TOKEN, false, false]] }),
  mintToChecked: (mint, dest, authority, amount, decimals) => ({ program: TOKEN,
    keys: [[mint, false, true], [dest, false, true], [authority, true, false]],
    data: Buffer.concat([Buffer.from([14]), u64le(amount), Buffer.from([decimals])]) }),
  freezeAccount: (account, mint, authority) => ({ program: TOKEN, data: Buffer.from([10]),
    keys: [[account, false, true], [mint, false, false], [authority, true, false]] }),
  memo: (text) => ({ program: MEMO, keys: [], data: Buffer.from(text) }),
};

// ---------------------------------------------------------------------------------------------
// Errors in Solana's shapes. litesvm's enums exist only in its typings (const enums), so their
// names are listed here in its declaration order.

const TX_ERRORS = ['AccountInUse', 'AccountLoadedTwice', 'AccountNotFound', 'ProgramAccountNotFound', 'InsufficientFundsForFee',
  'InvalidAccountForFee', 'AlreadyProcessed', 'BlockhashNotFound', 'CallChainTooDeep', 'MissingSignatureForFee',
  'InvalidAccountIndex', 'SignatureFailure', 'InvalidProgramForExecution', 'SanitizeFailure', 'ClusterMaintenance',
  'AccountBorrowOutstanding', 'WouldExceedMaxBlockCostLimit', 'UnsupportedVersion', 'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit', 'WouldExceedAccountDataBlockLimit', 'TooManyAccountLocks', 'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner', 'InvalidAddressLookupTableData', 'InvalidAddressLookupTableIndex', 'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit', 'WouldExceedAccountDataTotalLimit', 'MaxLoadedAccountsDataSizeExceeded', 'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit', 'UnbalancedTransaction', 'ProgramCacheHitMaxLimit', 'CommitCancelled'];
const IX_ERRORS = ['GenericError', 'InvalidArgument', 'InvalidInstructionData', 'InvalidAccountData', 'AccountDataTooSmall',
  'InsufficientFunds', 'IncorrectProgramId', 'MissingRequiredSignature', 'AccountAlreadyInitialized', 'UninitializedAccount',
  'UnbalancedInstruction', 'ModifiedProgramId', 'ExternalAccountLamportSpend', 'ExternalAccountDataModified',
  'ReadonlyLamportChange', 'ReadonlyDataModified', 'DuplicateAccountIndex', 'ExecutableModified', 'RentEpochModified',
  'NotEnoughAccountKeys', 'AccountDataSizeChanged', 'AccountNotExecutable', 'AccountBorrowFailed', 'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync', 'InvalidError', 'ExecutableDataModified', 'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt', 'UnsupportedProgramId', 'CallDepth', 'MissingAccount', 'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded', 'InvalidSeeds', 'InvalidRealloc', 'ComputationalBudgetExceeded', 'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure', 'ProgramFailedToComplete', 'ProgramFailedToCompile', 'Immutable', 'IncorrectAuthority',
  'AccountNotRentExempt', 'InvalidAccountOwner', 'ArithmeticOverflow', 'UnsupportedSysvar', 'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded', 'MaxAccountsExceeded', 'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits', 'BorshIoError'];

function txErrorJSON(e) {
  if (typeof e === 'number') return TX_ERRORS[e] || `Unknown(${e})`;
  if (e instanceof lsvm.TransactionErrorInstructionError) {
    const ie = e.err();
    let inner;
    if (typeof ie === 'number') inner = IX_ERRORS[ie] || `Unknown(${ie})`;
    else if (ie instanceof lsvm.InstructionErrorCustom) inner = { Custom: ie.code };
    else inner = { BorshIoError: ie.msg };
    return { InstructionError: [e.index, inner] };
  }
  if (e instanceof lsvm.TransactionErrorDuplicateInstruction) return { DuplicateInstruction: e.index };
  if (e instanceof lsvm.TransactionErrorInsufficientFundsForRent) return { InsufficientFundsForRent: { account_index: e.accountIndex } };
  return { ProgramExecutionTemporarilyRestricted: { account_index: e.accountIndex } };
}

// Solana's Display texts for the errors a payment meets; the others show their name.
const TX_ERROR_TEXT = {
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  ProgramAccountNotFound: 'Attempt to load a program that does not exist', InsufficientFundsForFee: 'Insufficient funds for fee',
  AlreadyProcessed: 'This transaction has already been processed', BlockhashNotFound: 'Blockhash not found',
  SignatureFailure: 'Transaction did not pass signature verification', InvalidAccountForFee: 'This account may not be used to pay transaction fees',
};
const IX_ERROR_TEXT = {
  GenericError: 'generic instruction error', InvalidArgument: 'invalid program argument', InvalidInstructionData: 'invalid instruction data',
  InvalidAccountData: 'invalid account data for instruction', InsufficientFunds: 'insufficient funds for instruction',
  IncorrectProgramId: 'incorrect program id for instruction', MissingRequiredSignature: 'missing required signature for instruction',
  AccountAlreadyInitialized: 'instruction requires an uninitialized account', UninitializedAccount: 'instruction requires an initialized account',
};
function txErrorText(j) {
  if (typeof j === 'string') return TX_ERROR_TEXT[j] || j;
  if (j.InstructionError) {
    const [i, e] = j.InstructionError;
    const t = typeof e === 'string' ? IX_ERROR_TEXT[e] || e : e.Custom !== undefined ? `custom program error: 0x${e.Custom.toString(16)}` : JSON.stringify(e);
    return `Error processing Instruction ${i}: ${t}`;
  }
  if (j.InsufficientFundsForRent) return `Transaction results in an account (${j.InsufficientFundsForRent.account_index}) with insufficient funds for rent`;
  return JSON.stringify(j);
}

class RpcError extends Error {
  constructor(code, message, data) { super(message); this.code = code; this.data = data; }
}
const badParams = (msg) => new RpcError(-32602, msg);

// ---------------------------------------------------------------------------------------------
// The chain

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  log('error', e.message);
  process.exit(2);
}
const svm = new lsvm.LiteSvm();
// Blockhashes are this server's (per slot, expiring after 150 slots), so litesvm's own check,
// which knows only its single latest hash, is off; signatures litesvm still checks.
svm.setBlockhashCheck(false);

const chain = {
  genesis: null, // Buffer(32)
  slot: 0,
  own: 0, // a counter in the memo of each of our own transactions, so that two equal ones
  // (two airdrops of 1 SOL to one address in one slot) have two signatures
  touched: new Set(), // base58 addresses to save
  sigs: new Map(), // base58 signature → record (u64s as decimal strings)
  recent: new Map(), // blockhash → its slot, for the slots still valid
};

const blockhashOf = (slot) => b58(sha256(chain.genesis, u64le(slot)));

function slotFor(cfg) {
  const c = (cfg && cfg.commitment) || 'finalized';
  if (c === 'processed' || c === 'recent' || c === 'single') return chain.slot;
  if (c === 'confirmed' || c === 'singleGossip') return Math.max(0, chain.slot - 1);
  if (c === 'finalized' || c === 'max' || c === 'root') return Math.max(0, chain.slot - FINALIZED_DEPTH);
  throw badParams(`Invalid commitment ${JSON.stringify(c)}: use processed, confirmed or finalized`);
}
const ctx = (cfg) => ({ slot: slotFor(cfg) });
const wrap = (value, cfg) => ({ context: ctx(cfg), value });

// Solana's epoch schedule: short epochs (32, 64, … slots) until firstNormalSlot.
function epochOf(slot) {
  const s = svm.getEpochSchedule();
  const perEpoch = Number(s.slotsPerEpoch), firstNormalSlot = Number(s.firstNormalSlot);
  if (s.warmup && slot < firstNormalSlot) {
    let epoch = 0, len = 32;
    while (slot >= 2 * len - 32) { epoch += 1; len *= 2; }
    return { epoch, slotIndex: slot - (len - 32), slotsInEpoch: len };
  }
  const i = slot - firstNormalSlot;
  return { epoch: Number(s.firstNormalEpoch) + Math.floor(i / perEpoch), slotIndex: i % perEpoch, slotsInEpoch: perEpoch };
}

function setSlot(slot) {
  chain.slot = slot;
  svm.warpToSlot(BigInt(slot));
  // Programs that read the clock see this chain's epoch and the wall time.
  const c = svm.getClock();
  c.epoch = BigInt(epochOf(slot).epoch);
  c.unixTimestamp = BigInt(Math.floor(Date.now() / 1000));
  svm.setClock(c);
  const from = Math.max(0, slot - MAX_AGE);
  for (const [h, s] of chain.recent) if (s < from || s > slot) chain.recent.delete(h);
  const have = new Set(chain.recent.values());
  for (let s = from; s <= slot; s++) if (!have.has(s)) chain.recent.set(blockhashOf(s), s);
}

// ---------------------------------------------------------------------------------------------
// State on disk

// A change (a transaction, an account) is saved within a second; the slot alone every 10 s, so
// an idle chain does not rewrite its whole state every second. Only a server killed outright
// loses anything: those last seconds of slots.
const saved = { at: 0, slot: -1, changed: false };
const markDirty = () => { saved.changed = true; };
function saveIfDue() {
  if (saved.changed || (chain.slot !== saved.slot && Date.now() - saved.at >= 10000)) save();
}

function save() {
  const accounts = {};
  for (const addr of chain.touched) {
    const a = svm.getAccount(unb58(addr));
    if (!a || a.executable() || NOT_SAVED_OWNERS.has(b58(Buffer.from(a.owner())))) continue;
    accounts[addr] = { lamports: a.lamports().toString(), owner: b58(Buffer.from(a.owner())),
      data: Buffer.from(a.data()).toString('base64'), executable: false, rentEpoch: a.rentEpoch().toString() };
  }
  const state = { version: 1, genesisHash: b58(chain.genesis), slot: chain.slot, own: chain.own,
    accounts, signatures: Object.fromEntries(chain.sigs) };
  const tmp = `${opts.state}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state));
  fs.renameSync(tmp, opts.state);
  Object.assign(saved, { at: Date.now(), slot: chain.slot, changed: false });
}

function restore() {
  let state;
  try {
    state = JSON.parse(fs.readFileSync(opts.state, 'utf8'));
  } catch (e) {
    if (e.code === 'ENOENT') return false;
    throw new Error(`cannot read the state ${opts.state} (${e.message}): move it away to start a new chain`);
  }
  if (state.version !== 1) throw new Error(`${opts.state} is of state version ${state.version}, not 1: move it away to start a new chain`);
  chain.genesis = unb58(state.genesisHash);
  chain.own = state.own || 0;
  for (const [addr, a] of Object.entries(state.accounts)) {
    svm.setAccount(unb58(addr), new lsvm.Account(BigInt(a.lamports), Buffer.from(a.data, 'base64'), unb58(a.owner),
      a.executable, BigInt(a.rentEpoch)));
    chain.touched.add(addr);
  }
  for (const [sig, r] of Object.entries(state.signatures)) chain.sigs.set(sig, r);
  setSlot(state.slot);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Token accounts

function tokenProgramName(owner) {
  if (owner.equals(TOKEN)) return 'spl-token';
  if (owner.equals(TOKEN_2022)) return 'spl-token-2022';
  return null;
}

const coption = (d, at) => (d.readUInt32LE(at) === 1 ? b58(d.subarray(at + 4, at + 36)) : null);

// Token-2022 accounts with extensions are longer, with their kind in byte 165 (1 mint, 2 account).
function parseMint(acc) {
  const owner = Buffer.from(acc.owner()), d = Buffer.from(acc.data());
  if (!tokenProgramName(owner)) return null;
  if (!(d.length === 82 || (owner.equals(TOKEN_2022) && d.length > 165 && d[165] === 1)) || !d[45]) return null;
  return { program: owner, mintAuthority: coption(d, 0), supply: d.readBigUInt64LE(36), decimals: d[44],
    freezeAuthority: coption(d, 46) };
}

function parseTokenAccount(acc) {
  const owner = Buffer.from(acc.owner()), d = Buffer.from(acc.data());
  if (!tokenProgramName(owner)) return null;
  if (!(d.length === 165 || (owner.equals(TOKEN_2022) && d.length > 165 && d[165] === 2)) || d[108] === 0) return null;
  const mintAcc = svm.getAccount(d.subarray(0, 32));
  const mint = mintAcc && parseMint(mintAcc);
  if (!mint) return null;
  return { program: owner, mint: b58(d.subarray(0, 32)), owner: b58(d.subarray(32, 64)), amount: d.readBigUInt64LE(64),
    delegate: coption(d, 72), state: d[108] === 2 ? 'frozen' : 'initialized',
    native: d.readUInt32LE(109) === 1 ? d.readBigUInt64LE(113) : null, delegatedAmount: d.readBigUInt64LE(121),
    closeAuthority: coption(d, 129), decimals: mint.decimals };
}

// Solana's UiTokenAmount; uiAmount is the float its wire format carries, the exact value is in
// amount and uiAmountString.
function uiAmount(amount, decimals) {
  const s = amount.toString().padStart(decimals + 1, '0');
  const whole = decimals ? s.slice(0, -decimals) : s, frac = decimals ? s.slice(-decimals).replace(/0+$/, '') : '';
  const str = frac ? `${whole}.${frac}` : whole;
  return { amount: amount.toString(), decimals, uiAmount: Number(str), uiAmountString: str };
}

function parsedAccountData(acc) {
  const name = tokenProgramName(Buffer.from(acc.owner()));
  if (!name) return null;
  const space = acc.data().length;
  const t = parseTokenAccount(acc);
  if (t) {
    const info = { isNative: t.native !== null, mint: t.mint, owner: t.owner, state: t.state, tokenAmount: uiAmount(t.amount, t.decimals) };
    if (t.delegate) { info.delegate = t.delegate; info.delegatedAmount = uiAmount(t.delegatedAmount, t.decimals); }
    if (t.native !== null) info.rentExemptReserve = uiAmount(t.native, t.decimals);
    if (t.closeAuthority) info.closeAuthority = t.closeAuthority;
    return { program: name, parsed: { info, type: 'account' }, space };
  }
  const m = parseMint(acc);
  if (m) {
    return { program: name, space, parsed: { type: 'mint', info: { decimals: m.decimals, freezeAuthority: m.freezeAuthority,
      isInitialized: true, mintAuthority: m.mintAuthority, supply: m.supply.toString() } } };
  }
  return null;
}

// An account as Solana answers it; encoding as asked (base58, base64, jsonParsed with a base64
// fall-back, or the legacy `binary`: a bare base58 string).
function uiAccount(acc, cfg, defaultEncoding) {
  const encoding = (cfg && cfg.encoding) || defaultEncoding;
  let data = Buffer.from(acc.data());
  const out = { lamports: acc.lamports(), owner: b58(Buffer.from(acc.owner())), data: null, executable: acc.executable(),
    rentEpoch: acc.rentEpoch(), space: data.length };
  if (encoding === 'jsonParsed') {
    out.data = parsedAccountData(acc) || [data.toString('base64'), 'base64'];
    return out;
  }
  const slice = cfg && cfg.dataSlice;
  if (slice) data = data.subarray(slice.offset || 0, (slice.offset || 0) + (slice.length ?? data.length));
  if (encoding === 'base64') out.data = [data.toString('base64'), 'base64'];
  else if (encoding === 'base58') out.data = [b58(data), 'base58'];
  else if (encoding === 'binary') out.data = b58(data);
  else throw badParams(`Invalid encoding ${JSON.stringify(encoding)}: use base64, base58 or jsonParsed`);
  return out;
}

function tokenBalances(keys) {
  const out = [];
  keys.forEach((k, i) => {
    const acc = svm.getAccount(k);
    const t = acc && parseTokenAccount(acc);
    if (t) out.push({ accountIndex: i, mint: t.mint, owner: t.owner, programId: b58(t.program), uiTokenAmount: uiAmount(t.amount, t.decimals) });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Executing transactions

const balance = (k) => svm.getBalance(k) ?? 0n;

function simulate(tx, sigVerify) {
  const was = svm.getSigverify();
  svm.setSigverify(sigVerify);
  let r;
  try {
    r = tx.version === 'legacy' ? svm.simulateLegacyTransaction(tx.raw) : svm.simulateVersionedTransaction(tx.raw);
  } finally {
    svm.setSigverify(was);
  }
  const failed = r instanceof lsvm.FailedTransactionMetadata;
  const meta = r.meta();
  return { err: failed ? txErrorJSON(r.err()) : null, logs: meta.logs(), unitsConsumed: meta.computeUnitsConsumed(),
    postAccounts: failed ? null : r.postAccounts() };
}

// Runs a transaction in litesvm. One that fails in execution still lands, as on Solana: litesvm
// charges its fee (1.5.0 does) and its signature is recorded with the error. One that fails
// before (no fee payer, no funds for the fee, …) is not included and leaves no trace.
function execute(tx) {
  const { all, loaded } = accountKeys(tx);
  const pre = all.map(balance);
  const preTok = tokenBalances(all);
  const r = tx.version === 'legacy' ? svm.sendLegacyTransaction(tx.raw) : svm.sendVersionedTransaction(tx.raw);
  const failed = r instanceof lsvm.FailedTransactionMetadata;
  const meta = failed ? r.meta() : r;
  const post = all.map(balance);
  const err = failed ? txErrorJSON(r.err()) : null;
  const charged = pre[0] - post[0];
  if (failed && charged <= 0n) return { landed: false, err, logs: meta.logs() };
  const sig = b58(tx.signatures[0]);
  const rec = {
    slot: chain.slot, blockTime: Math.floor(Date.now() / 1000), tx: tx.raw.toString('base64'), version: tx.version, err,
    fee: (failed ? charged : feeFor(tx)).toString(), preBalances: pre.map(String), postBalances: post.map(String),
    preTokenBalances: preTok, postTokenBalances: tokenBalances(all), logMessages: meta.logs(),
    computeUnitsConsumed: meta.computeUnitsConsumed().toString(), loadedAddresses: loaded,
    innerInstructions: meta.innerInstructions().map((list, index) => ({ index, instructions: list.map((ii) => {
      const c = ii.instruction();
      return { programIdIndex: c.programIdIndex(), accounts: [...c.accounts()], data: b58(Buffer.from(c.data())), stackHeight: ii.stackHeight() };
    }) })).filter((x) => x.instructions.length > 0),
  };
  chain.sigs.set(sig, rec);
  for (const k of all) chain.touched.add(b58(k));
  markDirty();
  log('info', `slot ${chain.slot}: ${sig} ${err ? `failed: ${txErrorText(err)}` : 'ok'}`);
  return { landed: true, sig, rec };
}

// Our own transactions (setup, airdrops, minting) must land, or the chain is not what it says.
function executeOwn(payer, instructions, signers) {
  chain.own += 1;
  instructions = [...instructions, ix.memo(`devsvm ${chain.own}`)];
  const tx = parseTx(buildTx(payer, instructions, unb58(blockhashOf(chain.slot)), signers));
  const r = execute(tx);
  if (!r.landed || r.rec.err) {
    throw new RpcError(-32002, `devsvm's own transaction failed: ${txErrorText(r.landed ? r.rec.err : r.err)}`,
      { err: r.landed ? r.rec.err : r.err, logs: r.landed ? r.rec.logMessages : r.logs });
  }
  return r.sig;
}

function genesis() {
  chain.genesis = crypto.randomBytes(32);
  setSlot(0);
  // The faucet is the one account made by fiat; everything else is done by transactions.
  svm.setAccount(FAUCET.pub, new lsvm.Account(10n ** 18n, new Uint8Array(0), SYSTEM, false, 2n ** 64n - 1n));
  chain.touched.add(b58(FAUCET.pub));
  const mintRent = svm.minimumBalanceForRentExemption(82n);
  executeOwn(FAUCET, [ix.createAccount(FAUCET.pub, USDC_MINT.pub, mintRent, 82, TOKEN),
    ix.initializeMint2(USDC_MINT.pub, USDC_DECIMALS, USDC_AUTHORITY.pub, USDC_AUTHORITY.pub)], [USDC_MINT]);
  executeOwn(FAUCET, [ix.createAtaIdempotent(FAUCET.pub, FROZEN_OWNER.pub, USDC_MINT.pub),
    ix.freezeAccount(FROZEN_ATA, USDC_MINT.pub, USDC_AUTHORITY.pub)], [USDC_AUTHORITY]);
}

// ---------------------------------------------------------------------------------------------
// Parameters

function pubkeyParam(v, what) {
  let k;
  try { k = unb58(v); } catch { k = null; }
  if (!k || k.length !== 32) throw badParams(`Invalid param: ${what} must be a base58 public key`);
  return k;
}

function txParam(v, cfg) {
  const encoding = (cfg && cfg.encoding) || 'base58';
  if (typeof v !== 'string') throw badParams('Invalid param: the transaction must be a string');
  let raw;
  if (encoding === 'base64') raw = Buffer.from(v, 'base64');
  else if (encoding === 'base58') { try { raw = unb58(v); } catch (e) { throw badParams(`invalid base58 encoding: ${e.message}`); } }
  else throw badParams(`unsupported encoding: ${encoding}. Supported encodings: base58, base64`);
  try {
    return parseTx(raw);
  } catch (e) {
    throw badParams(`failed to deserialize VersionedTransaction: ${e.message}`);
  }
}

function verifyAll(tx) {
  return tx.signatures.every((s, i) => verify(tx.keys[i], tx.message, s));
}

const cfgAt = (params, i) => (params[i] && typeof params[i] === 'object' && !Array.isArray(params[i]) ? params[i] : {});

function requireAccount(k, parse, what) {
  const acc = svm.getAccount(k);
  const v = acc && parse(acc);
  if (!v) throw badParams(`Invalid param: not a Token ${what}`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Methods

const methods = {
  getHealth: () => 'ok',
  getVersion: () => ({ 'solana-core': `litesvm ${LITESVM_VERSION} (treasury devsvm)`, 'feature-set': 0 }),
  getGenesisHash: () => b58(chain.genesis),
  getSlot: (p) => slotFor(cfgAt(p, 0)),
  getBlockHeight: (p) => slotFor(cfgAt(p, 0)),
  getEpochInfo: (p) => {
    const slot = slotFor(cfgAt(p, 0));
    return { absoluteSlot: slot, blockHeight: slot, ...epochOf(slot), transactionCount: chain.sigs.size };
  },
  getLatestBlockhash: (p) => {
    const cfg = cfgAt(p, 0), slot = slotFor(cfg);
    return wrap({ blockhash: blockhashOf(slot), lastValidBlockHeight: slot + MAX_AGE }, cfg);
  },
  isBlockhashValid: (p) => {
    if (typeof p[0] !== 'string') throw badParams('Invalid param: blockhash must be a base58 string');
    return wrap(chain.recent.has(p[0]), cfgAt(p, 1));
  },
  getBalance: (p) => wrap(balance(pubkeyParam(p[0], 'address')), cfgAt(p, 1)),
  getAccountInfo: (p) => {
    const cfg = cfgAt(p, 1), acc = svm.getAccount(pubkeyParam(p[0], 'address'));
    return wrap(acc ? uiAccount(acc, cfg, 'binary') : null, cfg);
  },
  getMultipleAccounts: (p) => {
    if (!Array.isArray(p[0]) || p[0].length > 100) throw badParams('Invalid param: an array of at most 100 addresses');
    const cfg = cfgAt(p, 1);
    return wrap(p[0].map((a) => { const acc = svm.getAccount(pubkeyParam(a, 'address')); return acc ? uiAccount(acc, cfg, 'base64') : null; }), cfg);
  },
  getTokenAccountBalance: (p) => {
    const t = requireAccount(pubkeyParam(p[0], 'token account'), parseTokenAccount, 'account');
    return wrap(uiAmount(t.amount, t.decimals), cfgAt(p, 1));
  },
  getTokenSupply: (p) => {
    const m = requireAccount(pubkeyParam(p[0], 'mint'), parseMint, 'mint');
    return wrap(uiAmount(m.supply, m.decimals), cfgAt(p, 1));
  },
  getTokenAccountsByOwner: (p) => {
    const owner = b58(pubkeyParam(p[0], 'owner'));
    const filter = cfgAt(p, 1), cfg = cfgAt(p, 2);
    let program, mint = null;
    if (filter.mint) {
      mint = b58(pubkeyParam(filter.mint, 'mint'));
      const acc = svm.getAccount(unb58(mint));
      if (!acc || !parseMint(acc)) throw badParams('Invalid param: could not find mint');
      program = Buffer.from(acc.owner());
    } else if (filter.programId) {
      program = pubkeyParam(filter.programId, 'programId');
      if (!tokenProgramName(program)) throw badParams('Invalid param: unrecognized Token program id');
    } else {
      throw badParams('Invalid param: the filter must be {mint} or {programId}');
    }
    const value = [];
    for (const x of svm.getProgramAccounts(program)) {
      const acc = x.account(), t = parseTokenAccount(acc);
      if (t && t.owner === owner && (!mint || t.mint === mint)) value.push({ pubkey: b58(Buffer.from(x.address)), account: uiAccount(acc, cfg, 'binary') });
    }
    return wrap(value, cfg);
  },
  getMinimumBalanceForRentExemption: (p) => {
    if (!Number.isSafeInteger(p[0]) || p[0] < 0) throw badParams('Invalid param: data length must be a non-negative integer');
    return svm.minimumBalanceForRentExemption(BigInt(p[0]));
  },
  getFeeForMessage: (p) => {
    let tx;
    try {
      // A message alone: parse it behind a placeholder signature section of the right size.
      const msg = Buffer.from(String(p[0]), 'base64');
      const versioned = msg[0] & 0x80 ? 1 : 0;
      const n = msg[versioned];
      tx = parseTx(Buffer.concat([Buffer.from([n]), Buffer.alloc(64 * n), msg]));
    } catch (e) {
      throw badParams(`invalid message: ${e.message}`);
    }
    return wrap(chain.recent.has(b58(tx.blockhash)) ? feeFor(tx) : null, cfgAt(p, 1));
  },
  getRecentPrioritizationFees: () => [],
  simulateTransaction: (p) => {
    const cfg = cfgAt(p, 1), tx = txParam(p[0], cfg);
    if (cfg.sigVerify && cfg.replaceRecentBlockhash) throw badParams('sigVerify may not be used with replaceRecentBlockhash');
    if (cfg.sigVerify && !verifyAll(tx)) throw new RpcError(-32003, 'Transaction signature verification failure');
    const replacement = cfg.replaceRecentBlockhash ? { blockhash: blockhashOf(chain.slot), lastValidBlockHeight: chain.slot + MAX_AGE } : null;
    const value = { err: null, logs: [], accounts: null, unitsConsumed: 0, returnData: null, innerInstructions: null, replacementBlockhash: replacement };
    if (!replacement && !chain.recent.has(b58(tx.blockhash))) {
      value.err = 'BlockhashNotFound';
      return wrap(value, { commitment: 'processed' });
    }
    const s = simulate(tx, !!cfg.sigVerify);
    Object.assign(value, { err: s.err, logs: s.logs, unitsConsumed: s.unitsConsumed });
    if (cfg.accounts && Array.isArray(cfg.accounts.addresses) && s.postAccounts) {
      const post = new Map(s.postAccounts.map((x) => [b58(Buffer.from(x.address)), x.account()]));
      value.accounts = cfg.accounts.addresses.map((a) => {
        const acc = post.get(a) || svm.getAccount(pubkeyParam(a, 'address'));
        return acc ? uiAccount(acc, cfg.accounts, 'base64') : null;
      });
    }
    return wrap(value, { commitment: 'processed' });
  },
  sendTransaction: (p) => {
    const cfg = cfgAt(p, 1), tx = txParam(p[0], cfg);
    if (!verifyAll(tx)) throw new RpcError(-32003, 'Transaction signature verification failure');
    const sig = b58(tx.signatures[0]);
    // A rebroadcast of a transaction already on the chain: Solana's leaders drop it as a
    // duplicate, and the client gets the signature it already has.
    if (chain.sigs.has(sig)) return sig;
    if (!chain.recent.has(b58(tx.blockhash))) {
      // Preflight refuses it. Without preflight Solana's RPC forwards it and the leader drops
      // it: the client has the signature, whose status stays null, and the transaction can
      // never land.
      if (cfg.skipPreflight) {
        log('warn', `dropped ${sig}: its blockhash ${b58(tx.blockhash)} has expired`);
        return sig;
      }
      throw new RpcError(-32002, 'Transaction simulation failed: Blockhash not found',
        { accounts: null, err: 'BlockhashNotFound', innerInstructions: null, logs: [], replacementBlockhash: null, returnData: null, unitsConsumed: 0 });
    }
    if (!cfg.skipPreflight) {
      const s = simulate(tx, true);
      if (s.err) {
        throw new RpcError(-32002, `Transaction simulation failed: ${txErrorText(s.err)}`,
          { accounts: null, err: s.err, innerInstructions: null, logs: s.logs, replacementBlockhash: null, returnData: null, unitsConsumed: s.unitsConsumed });
      }
    }
    const r = execute(tx);
    // Without preflight, a transaction that cannot even pay its fee is dropped by the leader,
    // as on Solana: the client has the signature, whose status stays null.
    if (!r.landed) log('warn', `dropped ${sig}: ${txErrorText(r.err)}`);
    return sig;
  },
  getSignatureStatuses: (p) => {
    if (!Array.isArray(p[0]) || p[0].length > 256) throw badParams('Invalid param: an array of at most 256 signatures');
    return wrap(p[0].map((s) => {
      const r = chain.sigs.get(s);
      if (!r) return null;
      const age = chain.slot - r.slot;
      const finalized = age >= FINALIZED_DEPTH;
      return { slot: r.slot, confirmations: finalized ? null : age, err: r.err, status: r.err ? { Err: r.err } : { Ok: null },
        confirmationStatus: finalized ? 'finalized' : age >= 1 ? 'confirmed' : 'processed' };
    }), { commitment: 'processed' });
  },
  getTransaction: (p) => {
    if (typeof p[0] !== 'string') throw badParams('Invalid param: signature must be a base58 string');
    const cfg = typeof p[1] === 'string' ? { encoding: p[1] } : cfgAt(p, 1);
    const commitment = cfg.commitment || 'finalized';
    if (commitment === 'processed') throw badParams('Method does not support commitment below `confirmed`');
    const r = chain.sigs.get(p[0]);
    if (!r || r.slot > slotFor({ commitment })) return null;
    if (r.version !== 'legacy' && cfg.maxSupportedTransactionVersion === undefined) {
      throw new RpcError(-32015, `Transaction version (${r.version}) is not supported by the requesting client. `
        + 'Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0');
    }
    const raw = Buffer.from(r.tx, 'base64');
    const encoding = cfg.encoding || 'json';
    let transaction;
    if (encoding === 'base64') transaction = [r.tx, 'base64'];
    else if (encoding === 'base58') transaction = [b58(raw), 'base58'];
    else if (encoding === 'json') transaction = txJSON(parseTx(raw));
    else throw badParams(`unsupported encoding ${JSON.stringify(encoding)}: devsvm answers json, base64 or base58`);
    const out = {
      slot: r.slot, blockTime: r.blockTime, transaction,
      meta: { err: r.err, status: r.err ? { Err: r.err } : { Ok: null }, fee: BigInt(r.fee), preBalances: r.preBalances.map(BigInt),
        postBalances: r.postBalances.map(BigInt), innerInstructions: r.innerInstructions, logMessages: r.logMessages,
        preTokenBalances: r.preTokenBalances, postTokenBalances: r.postTokenBalances, rewards: [],
        loadedAddresses: r.loadedAddresses, computeUnitsConsumed: BigInt(r.computeUnitsConsumed) },
    };
    if (cfg.maxSupportedTransactionVersion !== undefined) out.version = r.version;
    return out;
  },
  requestAirdrop: (p) => {
    const to = pubkeyParam(p[0], 'address');
    if (!Number.isSafeInteger(p[1]) || p[1] <= 0) throw badParams('Invalid param: lamports must be a positive integer below 2^53');
    return executeOwn(FAUCET, [ix.transfer(FAUCET.pub, to, p[1])], []);
  },

  devsvm_info: () => ({ genesisHash: b58(chain.genesis), slot: chain.slot, slotMs: opts.slotMs, usdcMint: b58(USDC_MINT.pub),
    usdcDecimals: USDC_DECIMALS, frozenOwner: b58(FROZEN_OWNER.pub), frozenTokenAccount: b58(FROZEN_ATA) }),
  devsvm_mintTo: (p) => {
    const owner = pubkeyParam(p[0], 'owner');
    if (typeof p[1] !== 'string' || !/^[0-9]+$/.test(p[1]) || BigInt(p[1]) >= 2n ** 64n) {
      throw badParams('Invalid param: base units must be a decimal string of a u64, e.g. "1000000" for 1 USDC');
    }
    const dest = ata(owner, USDC_MINT.pub);
    executeOwn(FAUCET, [ix.createAtaIdempotent(FAUCET.pub, owner, USDC_MINT.pub),
      ix.mintToChecked(USDC_MINT.pub, dest, USDC_AUTHORITY.pub, BigInt(p[1]), USDC_DECIMALS)], [USDC_AUTHORITY]);
    return parseTokenAccount(svm.getAccount(dest)).amount.toString();
  },
  devsvm_advanceSlots: (p) => {
    if (!Number.isSafeInteger(p[0]) || p[0] < 0) throw badParams('Invalid param: n must be a non-negative integer');
    setSlot(chain.slot + p[0]);
    markDirty();
    return chain.slot;
  },
};

// A transaction in getTransaction's `json` encoding.
function txJSON(tx) {
  const message = {
    accountKeys: tx.keys.map(b58),
    header: { numRequiredSignatures: tx.header[0], numReadonlySignedAccounts: tx.header[1], numReadonlyUnsignedAccounts: tx.header[2] },
    recentBlockhash: b58(tx.blockhash),
    instructions: tx.instructions.map((i) => ({ programIdIndex: i.programIndex, accounts: i.accounts, data: b58(i.data), stackHeight: null })),
  };
  if (tx.version !== 'legacy') {
    message.addressTableLookups = tx.lookups.map((l) => ({ accountKey: b58(l.table), writableIndexes: l.writable, readonlyIndexes: l.readonly }));
  }
  return { signatures: tx.signatures.map(b58), message };
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC over HTTP

function call(req) {
  const id = req && req.id !== undefined ? req.id : null;
  if (!req || typeof req !== 'object' || Array.isArray(req) || req.jsonrpc !== '2.0' || typeof req.method !== 'string') {
    return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id };
  }
  const m = Object.prototype.hasOwnProperty.call(methods, req.method) ? methods[req.method] : null;
  if (!m) return { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id };
  if (req.params !== undefined && !Array.isArray(req.params)) {
    return { jsonrpc: '2.0', error: { code: -32602, message: 'Invalid params: params must be an array' }, id };
  }
  try {
    return { jsonrpc: '2.0', result: m(req.params || []), id };
  } catch (e) {
    if (e instanceof RpcError) return { jsonrpc: '2.0', error: { code: e.code, message: e.message, data: e.data }, id };
    log('error', `${req.method}: ${e.stack || e}`);
    return { jsonrpc: '2.0', error: { code: -32603, message: `Internal error: ${e.message}` }, id };
  }
}

function handle(body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch {
    return { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null };
  }
  if (Array.isArray(req)) {
    if (req.length === 0) return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id: null };
    return req.map(call);
  }
  return call(req);
}

const MAX_BODY = 1 << 20;
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') { res.end('ok'); return; }
  if (req.method !== 'POST') { res.writeHead(405, { Allow: 'POST' }); res.end(); return; }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) { res.writeHead(413); res.end(); req.destroy(); return; }
    chunks.push(c);
  });
  req.on('end', () => {
    if (size > MAX_BODY) return;
    // Synchronous from here to the answer: a call reads and writes the chain with no await
    // between, so calls never interleave.
    const out = toJSON(handle(Buffer.concat(chunks).toString('utf8')));
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(out);
  });
});

function shutdown(why) {
  log('info', `stopping (${why}), state saved to ${opts.state}`);
  try { save(); } catch (e) { log('error', `saving the state: ${e.message}`); process.exitCode = 1; }
  process.exit();
}

try {
  if (restore()) log('info', `resumed the chain ${b58(chain.genesis)} at slot ${chain.slot} from ${opts.state}`);
  else { genesis(); save(); log('info', `new chain ${b58(chain.genesis)} in ${opts.state}`); }
} catch (e) {
  log('error', e instanceof RpcError ? `${e.message} ${JSON.stringify(e.data)}` : e.stack || String(e));
  process.exit(1);
}

setInterval(() => setSlot(chain.slot + 1), opts.slotMs);
setInterval(saveIfDue, 1000);
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
if (opts.exitWithStdin) {
  process.stdin.on('end', () => shutdown('stdin closed'));
  process.stdin.on('error', () => shutdown('stdin closed'));
  process.stdin.resume();
}

server.listen(opts.port, '127.0.0.1', () => {
  process.stdout.write(`devsvm listening on http://127.0.0.1:${server.address().port}\n`);
});
