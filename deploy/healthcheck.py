"""Exit 0 when the gRPC server at ADDRESS reports SERVING, 1 otherwise.

The container health check of docker-compose.yml (Kubernetes uses its own
gRPC probe). It asks the standard grpc.health.v1 service, which every
eventflow server answers without credentials on its public port:

    python /app/deploy/healthcheck.py 127.0.0.1:7233 [SERVICE]
"""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TIMEOUT_SECONDS = 3.0


def check(address: str, service: str = "") -> str:
    """The status name the server reports, or why it could not be asked."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_SECONDS
            )
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    status = check(*argv)
    print(status)
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
