#!/usr/bin/env node
// onnxruntime peer: runs an .onnx model on float32 inputs from a NumPy .npy file, in
// batches, on the CPU; writes the outputs as .npy and prints one JSON line of timings.
//
//   node bench/peers/onnxruntime_run.js --model M.onnx --input X.npy [--output Y.npy]
//        [--batch B] [--threads T] [--repeats R]
//
//   --model    the ONNX model (its first graph input is fed, its first graph output is kept)
//   --input    .npy, float32 little-endian, C order, shape N x C x H x W (any rank >= 1:
//              the first axis is the image axis, cut into batches of B)
//   --output   .npy of the outputs of all N images in order (float32, shape N x ...); omit to
//              only time. Written to "<file>.tmp.<pid>" and renamed (appears whole or not at all).
//   --batch    images per run (default 1); the last batch may be smaller, so the model's
//              input needs a free batch dimension unless B divides N and matches it
//   --threads  intraOpNumThreads (default 1; interOpNumThreads is 1, sequential execution)
//   --repeats  timed passes over all N images after one untimed pass (default 3)
//
// Output, one line on stdout:
//   {"peer":"onnxruntime-node","version":"1.30.0","images":N,"batch":B,"threads":T,
//    "repeats":R,"ms_per_image":<median over the repeats>,"ms_per_image_all":[...],
//    "output_shape":[N,...]}
// Exit 0 on success, 3 when onnxruntime-node cannot be found (callers skip the peer),
// 1 on any other error (one line "onnxruntime_run: error: ..." on stderr), 2 on bad usage.
//
// Where onnxruntime-node is found (bench/peers/README.md): plain require() first (NODE_PATH,
// a node_modules above this file), then the npm prefix $LENET5_ORT_PREFIX, default
// ~/.cache/lenet5-cl/onnxruntime-node, as bench/peers/install_onnxruntime.sh installs it.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function fail(code, message) {
  process.stderr.write(`onnxruntime_run: error: ${message}\n`);
  process.exit(code);
}

function ortPrefix() {
  return process.env.LENET5_ORT_PREFIX ||
         path.join(os.homedir(), '.cache', 'lenet5-cl', 'onnxruntime-node');
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (_) { /* not on the default paths: try the prefix */ }
  try {
    return require(require.resolve('onnxruntime-node', {paths: [path.join(ortPrefix(), 'node_modules')]}));
  } catch (e) {
    fail(3, `onnxruntime-node not found (run bench/peers/install_onnxruntime.sh or set LENET5_ORT_PREFIX): ${e.message.split('\n')[0]}`);
  }
}

function parseArgs(argv) {
  const opts = {batch: 1, threads: 1, repeats: 3};
  const ints = new Set(['batch', 'threads', 'repeats']);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    const value = argv[i + 1];
    if (!argv[i].startsWith('--') || value === undefined ||
        !['model', 'input', 'output', ...ints].includes(key)) {
      fail(2, `bad argument '${argv[i]}' (see the header of ${path.basename(__filename)})`);
    }
    if (ints.has(key)) {
      if (!/^[0-9]+$/.test(value) || Number(value) < (key === 'repeats' ? 0 : 1)) fail(2, `--${key}: bad value '${value}'`);
      opts[key] = Number(value);
    } else {
      opts[key] = value;
    }
  }
  if (!opts.model || !opts.input) fail(2, '--model and --input are required');
  return opts;
}

// NumPy .npy, versions 1-3, float32 little-endian, C order.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') fail(1, `${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const order = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !order || !shape) fail(1, `${file}: bad .npy header`);
  if (descr[1] !== '<f4') fail(1, `${file}: dtype ${descr[1]}, expected float32 ('<f4')`);
  if (order[1] !== 'False') fail(1, `${file}: Fortran order is not supported`);
  const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length).map(Number);
  if (dims.length < 1) fail(1, `${file}: a scalar, expected N x ...`);
  const count = dims.reduce((a, b) => a * b, 1);
  if (buf.length - start !== count * 4) fail(1, `${file}: ${buf.length - start} data bytes for shape (${dims})`);
  const data = new Float32Array(count);
  for (let i = 0; i < count; ++i) data[i] = buf.readFloatLE(start + 4 * i);
  return {dims, data};
}

function writeNpy(file, dims, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // pad to a multiple of 64
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(data.length * 4);
  for (let i = 0; i < data.length; ++i) body.writeFloatLE(data[i], 4 * i);
  const tmp = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
  fs.renameSync(tmp, file);
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const input = readNpy(opts.input);
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: opts.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const inName = session.inputNames[0];
  const outName = session.outputNames[0];
  const n = input.dims[0];
  const perImage = input.data.length / Math.max(n, 1);

  // One pass over all images; returns the outputs of the first output, in order.
  async function pass() {
    const parts = [];
    let outDims = null;
    for (let first = 0; first < n; first += opts.batch) {
      const count = Math.min(opts.batch, n - first);
      const slice = input.data.subarray(first * perImage, (first + count) * perImage);
      const feed = {[inName]: new ort.Tensor('float32', slice, [count, ...input.dims.slice(1)])};
      const result = await session.run(feed, [outName]);
      const out = result[outName];
      if (out.type !== 'float32') fail(1, `output '${outName}' is ${out.type}, expected float32`);
      outDims = out.dims;
      parts.push(out.data);
    }
    return {parts, outDims};
  }

  const {parts, outDims} = await pass();
  const times = [];
  for (let r = 0; r < opts.repeats; ++r) {
    const t0 = process.hrtime.bigint();
    await pass();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6 / Math.max(n, 1));
  }
  const total = parts.reduce((a, p) => a + p.length, 0);
  const outShape = n > 0 ? [n, ...outDims.slice(1)] : [0];
  if (opts.output) {
    const all = new Float32Array(total);
    let at = 0;
    for (const p of parts) { all.set(p, at); at += p.length; }
    writeNpy(opts.output, outShape, all);
  }
  console.log(JSON.stringify({
    peer: 'onnxruntime-node', version: ort.env.versions.node || ort.env.versions.common,
    images: n, batch: opts.batch, threads: opts.threads, repeats: opts.repeats,
    ms_per_image: times.length ? median(times) : null, ms_per_image_all: times,
    output_shape: outShape}));
}

main().catch(e => fail(1, String(e && e.message ? e.message : e).split('\n')[0]));
