// Reads a failed call's google.rpc.Status from the `grpc-status-details-bin` trailer,
// where eventflow puts an ErrorInfo with the reason code.
import { status as Code, type ServiceError } from "@grpc/grpc-js";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

const ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo";

/** A failed call, named by what the program was doing. */
export class StepError extends Error {
  constructor(
    readonly step: string,
    readonly cause: ServiceError,
  ) {
    super(`${step}: ${describe(cause)}`);
  }
}

/** "<CODE> <reason>: <message>", e.g. "UNAUTHENTICATED INVALID_API_KEY: the key is not valid". */
export function describe(error: ServiceError): string {
  const [details] = error.metadata?.get("grpc-status-details-bin") ?? [];
  const reason = details instanceof Uint8Array ? errorInfoReason(details) : undefined;
  return `${Code[error.code]} ${reason ?? "(no ErrorInfo)"}: ${error.details}`;
}

// google.rpc.Status { int32 code = 1; string message = 2; repeated Any details = 3; }
function errorInfoReason(status: Uint8Array): string | undefined {
  for (const [field, value] of lengthDelimited(status)) {
    if (field !== 3) continue;
    // google.protobuf.Any { string type_url = 1; bytes value = 2; }
    const any = new Map(lengthDelimited(value));
    const packed = any.get(2);
    if (decode(any.get(1)) === ERROR_INFO && packed) {
      // google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<...> metadata = 3; }
      return decode(new Map(lengthDelimited(packed)).get(1)) ?? "";
    }
  }
  return undefined;
}

function* lengthDelimited(message: Uint8Array): Generator<[number, Uint8Array]> {
  const reader = new BinaryReader(message);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (wireType === WireType.LengthDelimited) yield [field, reader.bytes()];
    else reader.skip(wireType);
  }
}

function decode(bytes: Uint8Array | undefined): string | undefined {
  return bytes === undefined ? undefined : Buffer.from(bytes).toString("utf8");
}
