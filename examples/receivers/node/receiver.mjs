// A webhook receiver for eventflow that verifies signatures with the `standardwebhooks`
// library (docs/webhooks.md): no eventflow code, only the Standard Webhooks rules.
//
//   WEBHOOK_SECRET=whsec_... PORT=8080 node receiver.mjs
//
// WEBHOOK_SECRET is the workflow's signing secret; during a rotation give both, separated
// by a space, and a delivery signed with either is accepted. Each request is answered
//   204  verified and handled
//   200  verified, but its webhook-id was handled before (a retry): not handled again
//   400  not verified (bad or missing signature, timestamp outside 5 minutes, not JSON)
// and logged as one JSON line on stdout. The first line is {"listening": "<url>"}.
import http from "node:http";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const MAX_BODY_BYTES = 2 * 1024 * 1024; // an event carries at most 1 MiB of data

const secrets = (process.env.WEBHOOK_SECRET ?? "").split(/\s+/).filter(Boolean);
if (secrets.length === 0) {
  console.error("receiver: set WEBHOOK_SECRET to the workflow's whsec_ signing secret");
  process.exit(2);
}
const verifiers = secrets.map((secret) => new Webhook(secret));
// webhook-ids already handled. A real receiver keeps these with the work it did, in one
// transaction, so that a retry after a crash is still recognised.
const handled = new Set();

function log(entry) {
  process.stdout.write(`${JSON.stringify(entry)}\n`);
}

// The envelope, if any of the secrets verifies the body against the headers.
function verify(body, headers) {
  let failure;
  for (const webhook of verifiers) {
    try {
      return webhook.verify(body, headers);
    } catch (error) {
      if (!(error instanceof WebhookVerificationError || error instanceof SyntaxError)) {
        throw error;
      }
      failure = error;
    }
  }
  throw failure;
}

// The body, or null when it is over MAX_BODY_BYTES.
function readBody(request) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    request.on("data", (chunk) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) {
        chunks.push(chunk);
      }
    });
    request.on("end", () => resolve(size > MAX_BODY_BYTES ? null : Buffer.concat(chunks)));
    request.on("error", reject);
  });
}

async function handle(request, response) {
  if (request.method !== "POST") {
    response.writeHead(405, { allow: "POST" }).end();
    return;
  }
  const body = await readBody(request);
  if (body === null) {
    response.writeHead(413).end();
    return;
  }
  const webhookId = request.headers["webhook-id"] ?? null;
  let envelope;
  try {
    envelope = verify(body, request.headers);
  } catch (error) {
    log({ outcome: "rejected", webhook_id: webhookId, error: error.message });
    response.writeHead(400, { "content-type": "text/plain" }).end("signature not verified\n");
    return;
  }
  if (handled.has(webhookId)) {
    log({ outcome: "duplicate", webhook_id: webhookId });
    response.writeHead(200).end();
    return;
  }
  handled.add(webhookId);
  // Do the work here: `envelope` is the body docs/webhooks.md describes.
  log({ outcome: "accepted", webhook_id: webhookId, envelope });
  response.writeHead(204).end();
}

const server = http.createServer((request, response) => {
  handle(request, response).catch((error) => {
    log({ outcome: "error", error: error.message });
    if (!response.headersSent) {
      response.writeHead(500).end();
    }
  });
});
server.listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? "127.0.0.1", () => {
  const { address, port } = server.address();
  log({ listening: `http://${address}:${port}` });
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
