// SPDX-License-Identifier: MIT
// A recording read by a reader somebody else wrote: npm's @mcap/core (the
// MCAP project's TypeScript library) and ajv for the channels' JSON
// Schemas, run by Node.js. Used by record_e2e.py.
//
//   node validate.mjs FILE         the whole file: every record through the
//                                  stream reader with its CRCs, the data
//                                  section's CRC, every message against its
//                                  channel's schema, sequences without gaps;
//                                  then the indexed reader (footer, summary,
//                                  statistics, chunk indexes) must give the
//                                  same messages
//   node validate.mjs --cut FILE   a file cut short: the stream reader's
//                                  complete messages, counted, and the
//                                  gaps in their sequences (changes lost)
//   node validate.mjs --lossy FILE as FILE, with gaps in the sequences
//                                  allowed and counted (a disk was full)
//   node validate.mjs --cuts START FILE  the file cut at every length from
//                                  START: each cut's whole function changes
//
// Prints one JSON line of figures; exits 1 with a message on any failure.
// The packages are found in $SHMCLOCK_NPM_DIR (default
// /var/cache/shmclock-npm/node_modules; .ci/setup installs them there).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";

const dir = process.env.SHMCLOCK_NPM_DIR || "/var/cache/shmclock-npm/node_modules";
const require = createRequire(dir + "/");
const { McapStreamReader, McapIndexedReader } = require("@mcap/core");
const Ajv2020 = require("ajv/dist/2020").default;

function fail(msg) {
  console.error(`validate.mjs: ${msg}`);
  process.exit(1);
}

const args = process.argv.slice(2);
if (args[0] === "--cuts") {
  // --cuts START FILE: the file cut at every length from START on; for
  // each, the function changes the stream reader returns whole.
  const all = new Uint8Array(readFileSync(args[2]));
  const out = {};
  for (let n = Number(args[1]); n <= all.length; n++) {
    const r = new McapStreamReader({ validateCrcs: true });
    const fn = new Set();
    let count = 0;
    r.append(all.subarray(0, n));
    try {
      for (let rec; (rec = r.nextRecord()); ) {
        if (rec.type === "Channel" && rec.topic === "/shmclock/function") fn.add(rec.id);
        if (rec.type === "Message" && fn.has(rec.channelId)) count++;
      }
    } catch (e) {
      fail(`cut at ${n}: ${e.message}`);
    }
    out[n] = count;
  }
  console.log(JSON.stringify(out));
  process.exit(0);
}
const cut = args[0] === "--cut";
const lossy = args[0] === "--lossy"; // whole, but with changes lost (a disk was full)
const file = cut || lossy ? args[1] : args[0];
if (!file) fail("usage: validate.mjs [--cut | --cuts START] FILE");
const bytes = new Uint8Array(readFileSync(file));

const ajv = new Ajv2020({ allErrors: true, strict: true });
const validators = new Map(); // schema id -> validate
const channels = new Map(); // channel id -> { topic, schemaId }
const seqs = new Map(); // channel id -> next sequence
const counts = {};
const streamed = [];
let lastFunctionSeq = -1n;
let gaps = 0;
let dataEnd;

const stream = new McapStreamReader({ validateCrcs: true });
stream.append(bytes);
for (;;) {
  let rec;
  try {
    rec = stream.nextRecord();
  } catch (e) {
    fail(`stream reader: ${e.message}`);
  }
  if (!rec) break;
  counts[rec.type] = (counts[rec.type] || 0) + 1;
  switch (rec.type) {
    case "Header":
      if (rec.profile !== "shmclock") fail(`profile ${rec.profile}`);
      break;
    case "Schema": {
      if (rec.encoding !== "jsonschema") fail(`schema ${rec.name}: encoding ${rec.encoding}`);
      const text = new TextDecoder().decode(rec.data);
      try {
        validators.set(rec.id, ajv.compile(JSON.parse(text)));
      } catch (e) {
        fail(`schema ${rec.name} does not compile: ${e.message}`);
      }
      break;
    }
    case "Channel":
      if (rec.messageEncoding !== "json") fail(`channel ${rec.topic}: ${rec.messageEncoding}`);
      if (!validators.has(rec.schemaId)) fail(`channel ${rec.topic} before its schema`);
      if (rec.metadata.get("shmclock.record") !== "1") fail(`channel ${rec.topic}: version`);
      channels.set(rec.id, { topic: rec.topic, schemaId: rec.schemaId });
      break;
    case "Message": {
      const ch = channels.get(rec.channelId);
      if (!ch) fail(`message on unknown channel ${rec.channelId}`);
      // Sequences without gaps, but in a file cut short by a full disk:
      // there a gap is the changes lost, counted.
      const want = seqs.get(rec.channelId) ?? 0;
      if (rec.sequence !== want && !((cut || lossy) && rec.sequence > want))
        fail(`${ch.topic}: sequence ${rec.sequence}, expected ${want}`);
      if (rec.sequence !== want) gaps += rec.sequence - want;
      seqs.set(rec.channelId, rec.sequence + 1);
      let msg;
      try {
        msg = JSON.parse(new TextDecoder().decode(rec.data));
      } catch (e) {
        fail(`${ch.topic} #${rec.sequence}: not JSON: ${e.message}`);
      }
      const v = validators.get(ch.schemaId);
      if (!v(msg)) fail(`${ch.topic} #${rec.sequence}: ${ajv.errorsText(v.errors)}`);
      if (ch.topic === "/shmclock/function") {
        const s = BigInt(msg.seq);
        if (s !== lastFunctionSeq + 1n && !((cut || lossy) && s > lastFunctionSeq))
          fail(`function change ${s} after ${lastFunctionSeq}`);
        lastFunctionSeq = s;
        const sim = BigInt(msg.sim_ns);
        if (rec.logTime !== (sim > 0n ? sim : 0n)) fail(`log_time ${rec.logTime} for sim ${sim}`);
        if (rec.publishTime !== BigInt(msg.wall_ns)) fail(`publish_time ${rec.publishTime}`);
      }
      streamed.push(`${rec.channelId}:${rec.sequence}`);
      break;
    }
    case "DataEnd":
      dataEnd = rec;
      break;
  }
}

if (cut) {
  console.log(JSON.stringify({ messages: streamed.length, done: stream.done(), gaps }));
  process.exit(0);
}
if (!stream.done()) fail(`the stream reader is not done: ${stream.bytesRemaining()} bytes left`);
for (const t of ["Header", "Schema", "Channel", "MessageIndex", "DataEnd",
                 "Statistics", "ChunkIndex", "SummaryOffset", "Footer"])
  if (!counts[t]) fail(`no ${t} record`);

const indexed = await McapIndexedReader.Initialize({
  readable: {
    size: async () => BigInt(bytes.length),
    read: async (off, len) => bytes.subarray(Number(off), Number(off + len)),
  },
});
if (indexed.dataSectionCrc === undefined) fail("no data section CRC");
const crc = crc32(bytes.subarray(0, Number(indexed.dataEndOffset)));
if (crc !== dataEnd.dataSectionCrc) fail(`data section CRC ${dataEnd.dataSectionCrc} != ${crc}`);
if (indexed.footer.summaryCrc === 0) fail("no summary CRC");
const stats = indexed.statistics;
if (!stats) fail("no statistics");
if (stats.messageCount !== BigInt(streamed.length))
  fail(`statistics: ${stats.messageCount} messages, the stream had ${streamed.length}`);
if (stats.chunkCount !== indexed.chunkIndexes.length) fail("statistics: chunk count");
const viaIndex = [];
for await (const m of indexed.readMessages({ validateCrcs: true }))
  viaIndex.push(`${m.channelId}:${m.sequence}`);
const a = [...streamed].sort(), b = [...viaIndex].sort();
if (a.length !== b.length || a.some((x, i) => x !== b[i]))
  fail(`the indexed reader gives ${b.length} messages, the stream ${a.length}`);
// Seeking: the messages from the middle of the run on, by log time.
const all = [];
for await (const m of indexed.readMessages({ topics: ["/shmclock/function"] })) all.push(m.logTime);
const mid = all.length ? all[all.length >> 1] : 0n;
let after = 0;
for await (const m of indexed.readMessages({ startTime: mid, topics: ["/shmclock/function"] })) {
  if (m.logTime < mid) fail(`seek: log time ${m.logTime} before ${mid}`);
  after++;
}
if (all.length && after !== all.filter((t) => t >= mid).length) fail("seek: a count differs");

console.log(JSON.stringify({
  messages: streamed.length,
  gaps,
  function: Number(lastFunctionSeq + 1n),
  lockstep: seqs.get(2) ?? 0,
  chunks: indexed.chunkIndexes.length,
  records: counts,
}));
