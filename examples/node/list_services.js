#!/usr/bin/env node
// What grpcurl, Postman and Evans do first: list a daemon's services over server reflection and describe one.
//
//   npm install                                            (in this folder)
//   node list_services.js [HOST:PORT] [v1|v1alpha]         (default 127.0.0.1:1778, v1)
//
// Prints {"services": [...], "dyno_methods": [...]}: the services the daemon lists, and the methods of dyno.v1.Dyno
// from the file descriptor the daemon sends for it. The reflection protos are those @grpc/reflection ships.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const descriptor = require('protobufjs/ext/descriptor');

const version = process.argv[3] || 'v1';
const protoDir = path.join(path.dirname(require.resolve('@grpc/reflection/package.json')), 'build', 'proto');
const definition = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, {
  includeDirs: [protoDir],
  keepCase: true,
});
const reflection = grpc.loadPackageDefinition(definition).grpc.reflection[version];

// One reflection session: send each request, gather one answer per request.
function ask(client, requests) {
  return new Promise((resolve, reject) => {
    const answers = [];
    const call = client.ServerReflectionInfo({ deadline: Date.now() + 10000 });
    call.on('data', (answer) => {
      answers.push(answer);
      if (answers.length === requests.length) call.end();
    });
    call.on('error', reject);
    call.on('end', () => resolve(answers));
    for (const r of requests) call.write(r);
  });
}

async function main() {
  const target = process.argv[2] || '127.0.0.1:1778';
  const client = new reflection.ServerReflection(target, grpc.credentials.createInsecure());
  try {
    const [listed] = await ask(client, [{ list_services: '' }]);
    const services = listed.list_services_response.service.map((s) => s.name);
    const [file] = await ask(client, [{ file_containing_symbol: 'dyno.v1.Dyno' }]);
    const methods = [];
    for (const raw of file.file_descriptor_response.file_descriptor_proto) {
      const proto = descriptor.FileDescriptorProto.decode(raw);
      for (const service of proto.service || []) {
        if (`${proto.package}.${service.name}` === 'dyno.v1.Dyno') methods.push(...service.method.map((m) => m.name));
      }
    }
    console.log(JSON.stringify({ services, dyno_methods: methods }));
    return 0;
  } catch (err) {
    console.error(`${target}: ${grpc.status[err.code]}: ${err.details}`);
    return 1;
  } finally {
    client.close();
  }
}

main().then((code) => { process.exitCode = code; });
