#!/usr/bin/env node
// A small dyno.v1 client with @grpc/grpc-js and its default options (a 4 MiB receive limit).
//
//   npm install                                  (in this folder: @grpc/grpc-js, @grpc/proto-loader)
//   node dyno_client.js [HOST:PORT]              (default 127.0.0.1:1778)
//
// It prints one JSON object: the daemon's status, the newest sample's GPU utilization, and how many samples and
// pages the whole history took. The .proto is read from the dyno checkout (DYNO_PROTO_DIR overrides protos/).
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_DIR = process.env.DYNO_PROTO_DIR || path.join(__dirname, '..', '..', 'protos');
const DEADLINE_MS = 10000; // every call gets a deadline: a daemon that does not answer never hangs the tool

const definition = protoLoader.loadSync('dyno/v1/dyno.proto', {
  includeDirs: [PROTO_DIR],
  keepCase: true, // field names as in the .proto (timestamp_ms)
  longs: Number, // int64 as JS numbers: dyno's (unix ms, byte counts) are far below 2**53
  enums: String,
  defaults: true,
});
const dyno = grpc.loadPackageDefinition(definition).dyno.v1;

function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + DEADLINE_MS }, (err, answer) => (err ? reject(err) : resolve(answer)));
  });
}

// Every sample in the daemon's history, oldest first, page by page (each answer fits 4 MiB).
async function wholeHistory(client, names) {
  let answer = await call(client, 'GetMetrics', { names, whole_history: true });
  const samples = [...answer.samples];
  let pages = 1;
  while (answer.next_page_token) {
    answer = await call(client, 'GetMetrics', { names, page_token: answer.next_page_token }); // the same names
    pages += 1;
    const more = [...answer.samples];
    if (samples.length && more.length && more[0].timestamp_ms === samples[samples.length - 1].timestamp_ms) {
      samples[samples.length - 1].metrics.push(...more.shift().metrics); // a sample too big for one page goes on
    }
    samples.push(...more);
  }
  return { samples, pages };
}

async function main() {
  const target = process.argv[2] || '127.0.0.1:1778';
  const client = new dyno.Dyno(target, grpc.credentials.createInsecure());
  try {
    const status = await call(client, 'GetStatus', {});
    const newest = await call(client, 'GetMetrics', { names: ['gpu_utilization_percent'] });
    const { samples, pages } = await wholeHistory(client, []);
    const utilization = {};
    for (const s of newest.samples) for (const m of s.metrics) utilization[m.labels.gpu] = m.value;
    console.log(JSON.stringify({
      hostname: status.hostname,
      version: status.version,
      gpus: status.gpus.length,
      newest_sample_ms: newest.samples.length ? newest.samples[newest.samples.length - 1].timestamp_ms : null,
      gpu_utilization_percent: utilization,
      history_samples: samples.length,
      history_pages: pages,
      history_values: samples.reduce((n, s) => n + s.metrics.length, 0),
    }));
    return 0;
  } catch (err) { // UNAVAILABLE: no daemon there; see docs/API.md for the others
    console.error(`${target}: ${grpc.status[err.code]}: ${err.details}`);
    return 1;
  } finally {
    client.close();
  }
}

main().then((code) => { process.exitCode = code; });
