// Drives a running eventflow stack through the generated TypeScript client (@grpc/grpc-js,
// code from ts-proto): creates a tenant, uploads and approves an action, publishes a
// workflow that runs it, publishes an event, and reads back the instance and the
// projection the action wrote.
//
// It prints a JSON summary on stdout and exits 0, or prints the failing call with its
// gRPC status code and ErrorInfo reason on stderr and exits 1. The operator token comes
// from EVENTFLOW_OPERATOR_TOKEN so that it never shows in a process listing. The test
// harness builds it with the generated client copied into gen/ (from `make clients`).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { credentials } from "@grpc/grpc-js";

import { Scenario } from "./scenario";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      address: { type: "string", default: "127.0.0.1:7233" },
      wasm: { type: "string" },
      projection: { type: "string" },
      "entity-type": { type: "string", default: "" },
      "entity-id": { type: "string", default: "" },
    },
  });
  const operatorToken = process.env.EVENTFLOW_OPERATOR_TOKEN ?? "";
  if (!operatorToken || !values.wasm || !values.projection) {
    throw new Error("EVENTFLOW_OPERATOR_TOKEN, --wasm and --projection are required");
  }
  const scenario = new Scenario(values.address, credentials.createInsecure(), {
    operatorToken,
    projection: {
      name: values.projection,
      entityType: values["entity-type"],
      entityId: values["entity-id"],
    },
  });
  try {
    const summary = await scenario.run(readFileSync(values.wasm));
    process.stdout.write(JSON.stringify(summary) + "\n");
  } finally {
    scenario.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
