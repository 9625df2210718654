#!/usr/bin/env node
// Drives trellis-serve's web page in headless Chromium (puppeteer-core):
// picks a conditioning .npy, submits, waits for the job's done state, then for
// both viewers to draw, and checks that the viewers' pixels are not all one
// background color. Run by test_serve_browser.py.
//
//   node serve_browser_check.js URL COND_NPY SCREENSHOT_PNG
//
// Environment: TRELLIS_CHROMIUM (default /usr/bin/chromium),
// TRELLIS_WEB_NODE_MODULES (where puppeteer-core is; default
// <repo>/build-deps/web/node_modules, from scripts/install-deps.sh --test),
// TRELLIS_BROWSER_TIMEOUT_S (whole run, default 100).
// Prints one JSON report on stdout; exit status 0 when every check passed,
// 1 when one failed, 2 when the browser could not run.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [url, condPath, screenshotPath] = process.argv.slice(2);
if (!url || !condPath || !screenshotPath) {
  console.error('usage: node serve_browser_check.js URL COND_NPY SCREENSHOT_PNG');
  process.exit(2);
}
const modules = process.env.TRELLIS_WEB_NODE_MODULES ||
  path.join(__dirname, '..', '..', 'build-deps', 'web', 'node_modules');
const chromium = process.env.TRELLIS_CHROMIUM || '/usr/bin/chromium';
const deadline = Date.now() + 1000 * Number(process.env.TRELLIS_BROWSER_TIMEOUT_S || 100);
const remaining = () => Math.max(1000, deadline - Date.now());

// A viewer counts as drawn when at least this share of its pixels differ from
// its most common color (the background) by more than COLOR_TOLERANCE.
const MIN_DRAWN_SHARE = 0.01;
const COLOR_TOLERANCE = 12;

/// Decodes an 8-bit, non-interlaced PNG (what Chromium's screenshots are).
function decodePng(png) {
  if (png.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let width, height, channels;
  const idat = [];
  for (let at = 8; at < png.length;) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colorType, , , interlace] = data.subarray(8);
      channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[colorType];
      if (depth !== 8 || !channels || interlace) {
        throw new Error(`unsupported PNG: depth ${depth}, color type ${colorType}, interlace ${interlace}`);
      }
    } else if (type === 'IDAT') {
      idat.push(data);
    }
    at += 12 + length;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const pixels = Buffer.alloc(height * stride);
  for (let y = 0; y < height; ++y) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = pixels.subarray(y * stride, (y + 1) * stride);
    const up = y ? pixels.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
    for (let i = 0; i < stride; ++i) {
      const a = i >= channels ? out[i - channels] : 0;
      const b = up[i];
      const c = i >= channels ? up[i - channels] : 0;
      let predicted = 0;
      if (filter === 1) predicted = a;
      else if (filter === 2) predicted = b;
      else if (filter === 3) predicted = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[i] = (line[i] + predicted) & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

/// The share of pixels that differ from the most common color.
function drawnShare(png) {
  const { width, height, channels, pixels } = decodePng(png);
  const rgb = (i) => (channels >= 3 ? [pixels[i], pixels[i + 1], pixels[i + 2]] : [pixels[i], pixels[i], pixels[i]]);
  const counts = new Map();
  for (let i = 0; i < pixels.length; i += channels) {
    const key = rgb(i).join(',');
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  const background = [...counts.entries()].sort((x, y) => y[1] - x[1])[0][0].split(',').map(Number);
  let differing = 0;
  for (let i = 0; i < pixels.length; i += channels) {
    const c = rgb(i);
    if (Math.max(...c.map((v, k) => Math.abs(v - background[k]))) > COLOR_TOLERANCE) ++differing;
  }
  return { share: differing / (width * height), background, width, height };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  let puppeteer;
  try {
    puppeteer = require(path.join(modules, 'puppeteer-core'));
  } catch (e) {
    return { exit: 2, report: { error: `cannot load puppeteer-core from ${modules}: ${e.message}` } };
  }
  const report = { checks: {}, seconds: {}, console: [], failedRequests: [] };
  const started = Date.now();
  const mark = (name) => (report.seconds[name] = (Date.now() - started) / 1000);
  const args = [
    // Software WebGL: CI machines have no GPU.
    '--use-angle=swiftshader',
    '--enable-unsafe-swiftshader',
    '--ignore-gpu-blocklist',
    '--disable-dev-shm-usage',
  ];
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  let browser;
  try {
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args,
      defaultViewport: { width: 1280, height: 1200 },
      timeout: 30000,
      protocolTimeout: remaining(),
    });
  } catch (e) {
    return { exit: 2, report: { error: `cannot start ${chromium}: ${e.message}` } };
  }
  const check = (name, ok, detail) => {
    report.checks[name] = { ok: Boolean(ok), ...(detail === undefined ? {} : { detail }) };
    if (!ok) throw new Error(`check failed: ${name}${detail === undefined ? '' : `: ${JSON.stringify(detail)}`}`);
  };
  try {
    const page = await browser.newPage();
    page.on('console', (m) => report.console.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => report.console.push(`pageerror: ${e.message}`));
    page.on('requestfailed', (r) => report.failedRequests.push(`${r.url()}: ${r.failure()?.errorText}`));
    page.on('response', (r) => {
      if (r.status() >= 400) report.failedRequests.push(`${r.url()}: HTTP ${r.status()}`);
    });

    await page.goto(url, { waitUntil: 'load', timeout: remaining() });
    await page.waitForFunction(() => document.body.dataset.state === 'idle', { timeout: remaining() });
    mark('page loaded');
    check('page loaded without failed requests', report.failedRequests.length === 0, report.failedRequests);

    await (await page.$('#cond')).uploadFile(condPath);
    await page.type('#seed', '1');
    await page.type('#ss-steps', '25'); // the default: the field is sent, the result is the same
    await page.click('#submit');
    await page.waitForFunction(
      () => ['done', 'failed', 'cancelled'].includes(document.body.dataset.state),
      { timeout: remaining(), polling: 200 },
    );
    const state = await page.evaluate(() => ({
      state: document.body.dataset.state,
      error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
      status: document.getElementById('status').textContent,
      voxels: document.getElementById('voxels').textContent,
      bars: [...document.querySelectorAll('.stage')].map((row) => ({
        stage: row.dataset.stage,
        value: row.querySelector('progress').value,
        max: row.querySelector('progress').max,
        detail: row.querySelector('.detail').textContent,
      })),
      files: [...document.querySelectorAll('#downloads a')].map((a) => a.textContent),
    }));
    report.page = state;
    mark('job ended');
    check('job done', state.state === 'done', state.error || state.status);
    check('every progress bar full', state.bars.every((b) => b.max > 0 && b.value === b.max), state.bars);
    check('voxel count shown', /\d+ voxels/.test(state.voxels), state.voxels);
    check('files listed', ['mesh.glb', 'gaussians.ply'].every((f) => state.files.includes(f)), state.files);
    const download = await page.evaluate(async () => {
      const link = [...document.querySelectorAll('#downloads a')].find((a) => a.textContent === 'gaussians.ply');
      const response = await fetch(link.href);
      return { status: response.status, bytes: (await response.arrayBuffer()).byteLength };
    });
    check('download link serves the file', download.status === 200 && download.bytes > 0, download);

    await page.waitForFunction(
      () => ['mesh', 'splats'].every((k) => ['shown', 'error'].includes(document.body.dataset[k])),
      { timeout: remaining(), polling: 200 },
    );
    mark('viewers loaded');
    const viewers = await page.evaluate(() => ({ mesh: document.body.dataset.mesh, splats: document.body.dataset.splats }));
    check('viewers loaded', viewers.mesh === 'shown' && viewers.splats === 'shown', {
      ...viewers,
      error: await page.$eval('#error', (e) => e.textContent),
    });

    // Drawing goes on after "shown" (the splat sort runs in a worker): poll.
    const drawn = {};
    for (;;) {
      for (const [name, selector] of [['mesh', '#mesh-viewport'], ['splats', '#splats-viewport']]) {
        drawn[name] = drawnShare(Buffer.from(await (await page.$(selector)).screenshot({ type: 'png' })));
      }
      if (Object.values(drawn).every((d) => d.share >= MIN_DRAWN_SHARE) || deadline - Date.now() < 5000) break;
      await sleep(500);
    }
    mark('viewers drew');
    const viewerShot = Buffer.from(await (await page.$('#viewers')).screenshot({ type: 'png' }));
    fs.mkdirSync(path.dirname(screenshotPath), { recursive: true });
    fs.writeFileSync(screenshotPath, viewerShot);
    report.screenshot = screenshotPath;
    for (const [name, d] of Object.entries(drawn)) {
      check(`${name} viewer drew the model`, d.share >= MIN_DRAWN_SHARE, d);
    }
    return { exit: 0, report };
  } catch (e) {
    report.error = e.message;
    return { exit: 1, report };
  } finally {
    await browser.close().catch(() => {});
  }
}

const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ error: 'timed out (TRELLIS_BROWSER_TIMEOUT_S)' }));
  process.exit(1);
}, remaining() + 10000);
main().then(({ exit, report }) => {
  clearTimeout(watchdog);
  console.log(JSON.stringify(report, null, 2));
  process.exit(exit);
}, (e) => {
  console.log(JSON.stringify({ error: e.stack || String(e) }));
  process.exit(1);
});
